"""The 15 Hendrycks corruptions (ImageNet-C / CIFAR-10-C style), batched and deterministic.

STAMP builds its corrupted in-distribution streams and its corrupted outlier sets (SVHN-C,
LSUN-C, Places365-C, Textures-C) with the Hendrycks generators, so this module re-implements
them with the processing rules and the three parameter tables of ``protocol.md`` §7
(§7.2: 32×32 CIFAR/SVHN/LSUN, §7.3: 224×224 ImageNet/Places365/Textures, §7.4: 64×64
Tiny-ImageNet). The table is chosen from the image size. Everything is numpy + scipy + Pillow;
OpenCV, scikit-image and Wand/ImageMagick are not needed.

Faithful to the reference (§7.1)
--------------------------------
* All formulas and constants, the float dtypes of the reference (float32 for zoom, snow and
  elastic; float64 elsewhere) and the final truncating cast ``np.uint8(clip(x, 0, 255))``;
  frost works in 0..255; pixelate and JPEG go through PIL (``BOX`` down/up, PIL JPEG codec).
* rgb2hsv/hsv2rgb (brightness), skimage ``random_noise(mode='s&p')`` (impulse, the per-element
  Bernoulli form of scikit-image 0.21 pinned by the STAMP environment), skimage ``gaussian``
  (= ``scipy.ndimage.gaussian_filter``, mode 'nearest', truncate 4 for glass blur; 'reflect',
  truncate 3 for elastic) and ``cv2.COLOR_RGB2GRAY`` (snow) are re-implemented in numpy/scipy.
* Glass blur uses a per-channel spatial blur (§6.7). The pixel "swap" of the reference is the
  statement ``x[h, w], x[h', w'] = x[h', w'], x[h, w]`` on numpy views, which — because the
  right-hand side holds *views* — actually copies pixel (h', w') into (h, w) and leaves
  (h', w') unchanged. That is what produced CIFAR-10-C and the STAMP outlier sets, so that
  is what we do (the §7.1 wording "swapping" describes the intent, not the behaviour).
* Defocus: the disk kernel and its 3×3 / 5×5 cv2 Gaussian anti-aliasing (reflect-101 border)
  are reproduced; the per-channel ``cv2.filter2D`` (correlation, reflect-101) is done with a
  batched FFT on a reflect-101 padded batch (float rounding differs at the 1e-16 level).
* Zoom blur and snow use ``scipy.ndimage.zoom`` (order 1) exactly like the reference
  ``clipped_zoom``; the batch is folded into the channel axis, which gives bit-identical results.
* Elastic: ``cv2.getAffineTransform`` + ``cv2.warpAffine`` (bilinear, reflect-101) are
  emulated including OpenCV's fixed-point coordinates (1/32-pixel sub-pixel positions, 10-bit
  affine scale) and float32 bilinear weights; the displacement resampling is scipy
  ``map_coordinates(order=1, mode='reflect')`` as in the reference.
* Fog: the reference diamond-square plasma fractal including its quirk
  ``wibble * uniform(-wibble, wibble)`` (noise amplitude wibble², wibble divided by ``decay``
  per level), per-image min/max normalisation, map size 32 / 64 / 256 cropped to the image size.

Approximations, and how close they are
--------------------------------------
* **Random streams.** Hendrycks' draws come from the global ``np.random`` state of a
  multi-worker DataLoader and cannot be reproduced. Here image ``i`` of a call uses its own
  generator ``np.random.default_rng([seed, corruption_index, severity, index_offset + i])``,
  so the output depends only on (seed, corruption, severity, image content, dataset index),
  never on the batch size or on how a dataset is split into chunks: corrupting
  ``images[a:b]`` with ``index_offset=a`` gives the same bytes as rows ``a:b`` of corrupting
  the whole set. The *distributions* of all draws equal the reference ones.
* **Motion blur** (motion_blur and the snow layer) re-implements ImageMagick
  ``MotionBlurImage``: kernel width ``2*ceil(radius)+1`` (``GetOptimalKernelWidth1D`` with
  radius > 0), one-sided Gaussian weights ``exp(-i²/(2σ²))``, i = 0..width-1, normalised to
  sum 1; tap i samples the pixel at integer offset ``(round(i·cosθ), round(i·sinθ))``
  (``ceil(v - 0.5)`` as in ImageMagick: x to the right, y downwards) with edge-clamped
  ("edge" virtual pixel) borders; the Q16 quantum rounding and the truncating 8-bit PNG
  output are emulated. Checked against Wand + ImageMagick 6.9.11-60 Q16 on the three image
  sizes with the same random draws: motion_blur and snow give identical bytes (snow at 224:
  ±1 on ~1e-5 of the values). Other ImageMagick versions are not covered.
* **Frost** textures are the files shipped in the ``imagecorruptions`` wheel (same files and
  sizes as the Hendrycks repository, §7.1). The reference rescales with ``cv2.resize(fx=fy=s,
  INTER_LINEAR)``; we emulate OpenCV's fixed-point bilinear in numpy (no anti-aliasing)
  rather than using PIL's bilinear, which anti-aliases when down-scaling and would soften the
  texture. Textures are decoded by Pillow instead of OpenCV. Checked bit-identical to
  opencv-python-headless 4.8.1 (the STAMP pin) for all five textures at scales 0.2 and 0.3 and
  unscaled; other OpenCV builds (e.g. non-SIMD) may differ by one grey level.
* Defocus uses FFT correlation instead of ``cv2.filter2D``: identical bytes to OpenCV 4.8.1
  on 32/64 images, ±1 on ~3e-6 of the values at 224 (a value sitting on an integer before the
  truncating cast). For r ≥ 8 (224 table, severities 4–5) the reference kernel sums to ≈1.01
  because the disk touches the 17×17 / 21×21 grid border and cv2's reflect-101 blur folds
  mass back in; that is reproduced, not corrected.
* Impulse noise follows scikit-image 0.21 (independent Bernoulli per value); scikit-image
  ≤ 0.18 placed exactly ceil(amount·size/2) salt and pepper values instead.

The "identical bytes" claims come from a one-off check outside the repository (throw-away
venv with opencv-python-headless 4.8.1.78, scikit-image 0.21.0, Wand + libMagickWand
6.9.11-60 Q16): with the same per-image draws, elastic_transform, brightness, motion_blur,
the glass-blur Gaussian, the frost textures and, at 32/64, defocus_blur and snow match the
original code bit for bit. Nothing in this module or its tests needs those packages.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from scipy import fft as sp_fft
from scipy import ndimage

from stamplib import validation

__all__ = ["CORRUPTIONS", "SUPPORTED_SIZES", "corrupt", "parameters"]

CORRUPTIONS: tuple[str, ...] = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "snow",
    "frost",
    "fog",
    "brightness",
    "contrast",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
)

SUPPORTED_SIZES: tuple[int, ...] = (32, 64, 224)

# ----------------------------------------------------------------------------------------
# Parameter tables (protocol.md §7.2 / §7.3 / §7.4). Zoom blur stores (stop, step) of
# np.arange(1, stop, step); elastic stores the products exactly as the reference computes them.
# ----------------------------------------------------------------------------------------

_T32: dict[str, list[Any]] = {
    "gaussian_noise": [0.04, 0.06, 0.08, 0.09, 0.10],
    "shot_noise": [500, 250, 100, 75, 50],
    "impulse_noise": [0.01, 0.02, 0.03, 0.05, 0.07],
    "defocus_blur": [(0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1)],
    "glass_blur": [(0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2)],
    "motion_blur": [(6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5)],
    "zoom_blur": [(1.06, 0.01), (1.11, 0.01), (1.16, 0.01), (1.21, 0.01), (1.26, 0.01)],
    "snow": [
        (0.1, 0.2, 1, 0.6, 8, 3, 0.95),
        (0.1, 0.2, 1, 0.5, 10, 4, 0.9),
        (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9),
        (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85),
        (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8),
    ],
    "frost": [(1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45)],
    "fog": [(0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75)],
    "brightness": [0.05, 0.1, 0.15, 0.2, 0.3],
    "contrast": [0.75, 0.5, 0.4, 0.3, 0.15],
    "elastic_transform": [
        (32 * 0, 32 * 0, 32 * 0.08),
        (32 * 0.05, 32 * 0.2, 32 * 0.07),
        (32 * 0.08, 32 * 0.06, 32 * 0.06),
        (32 * 0.1, 32 * 0.04, 32 * 0.05),
        (32 * 0.1, 32 * 0.03, 32 * 0.03),
    ],
    "pixelate": [0.95, 0.9, 0.85, 0.75, 0.65],
    "jpeg_compression": [80, 65, 58, 50, 40],
}

_T224: dict[str, list[Any]] = {
    "gaussian_noise": [0.08, 0.12, 0.18, 0.26, 0.38],
    "shot_noise": [60, 25, 12, 5, 3],
    "impulse_noise": [0.03, 0.06, 0.09, 0.17, 0.27],
    "defocus_blur": [(3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)],
    "glass_blur": [(0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2)],
    "motion_blur": [(10, 3), (15, 5), (15, 8), (15, 12), (20, 15)],
    "zoom_blur": [(1.11, 0.01), (1.16, 0.01), (1.21, 0.02), (1.26, 0.02), (1.31, 0.03)],
    "snow": [
        (0.1, 0.3, 3, 0.5, 10, 4, 0.8),
        (0.2, 0.3, 2, 0.5, 12, 4, 0.7),
        (0.55, 0.3, 4, 0.9, 12, 8, 0.7),
        (0.55, 0.3, 4.5, 0.85, 12, 8, 0.65),
        (0.55, 0.3, 2.5, 0.85, 12, 12, 0.55),
    ],
    "frost": [(1, 0.4), (0.8, 0.6), (0.7, 0.7), (0.65, 0.7), (0.6, 0.75)],
    "fog": [(1.5, 2), (2.0, 2), (2.5, 1.7), (2.5, 1.5), (3.0, 1.4)],
    "brightness": [0.1, 0.2, 0.3, 0.4, 0.5],
    "contrast": [0.4, 0.3, 0.2, 0.1, 0.05],
    "elastic_transform": [
        (244 * 2, 244 * 0.7, 244 * 0.1),  # 244 (not 224) as in the reference, §7.3
        (244 * 2, 244 * 0.08, 244 * 0.2),
        (244 * 0.05, 244 * 0.01, 244 * 0.02),
        (244 * 0.07, 244 * 0.01, 244 * 0.02),
        (244 * 0.12, 244 * 0.01, 244 * 0.02),
    ],
    "pixelate": [0.6, 0.5, 0.4, 0.3, 0.25],
    "jpeg_compression": [25, 18, 15, 10, 7],
}

_T64: dict[str, list[Any]] = {
    "gaussian_noise": [0.04, 0.08, 0.12, 0.15, 0.18],
    "shot_noise": [250, 100, 50, 30, 15],
    "impulse_noise": [0.01, 0.02, 0.05, 0.08, 0.14],
    "defocus_blur": [(0.5, 0.6), (1, 0.1), (1.5, 0.1), (2.5, 0.01), (3, 0.1)],
    "glass_blur": [(0.1, 1, 1), (0.5, 1, 1), (0.6, 1, 2), (0.7, 2, 1), (0.9, 2, 2)],
    "motion_blur": [(10, 1), (10, 1.5), (10, 2), (10, 2.5), (12, 3)],
    "zoom_blur": [(1.06, 0.01), (1.11, 0.01), (1.16, 0.01), (1.21, 0.01), (1.26, 0.01)],
    "snow": [
        (0.1, 0.2, 1, 0.6, 8, 3, 0.8),
        (0.1, 0.2, 1, 0.5, 10, 4, 0.8),
        (0.15, 0.3, 1.75, 0.55, 10, 4, 0.7),
        (0.25, 0.3, 2.25, 0.6, 12, 6, 0.65),
        (0.3, 0.3, 1.25, 0.65, 14, 12, 0.6),
    ],
    "frost": [(1, 0.3), (0.9, 0.4), (0.8, 0.45), (0.75, 0.5), (0.7, 0.55)],
    "fog": [(0.4, 3), (0.7, 3), (1, 2.5), (1.5, 2), (2, 1.75)],
    "brightness": [0.1, 0.2, 0.3, 0.4, 0.5],
    "contrast": [0.4, 0.3, 0.2, 0.1, 0.05],
    "elastic_transform": [
        (64 * 0, 64 * 0, 64 * 0.08),
        (64 * 0.05, 64 * 0.3, 64 * 0.06),
        (64 * 0.1, 64 * 0.08, 64 * 0.06),
        (64 * 0.1, 64 * 0.03, 64 * 0.03),
        (64 * 0.16, 64 * 0.03, 64 * 0.02),
    ],
    "pixelate": [0.9, 0.8, 0.7, 0.6, 0.5],
    "jpeg_compression": [65, 58, 50, 40, 25],
}

_TABLES: dict[int, dict[str, list[Any]]] = {32: _T32, 64: _T64, 224: _T224}
# Size-dependent constants that are not in the per-severity rows (§7.2–§7.4).
_FROST_SCALE: dict[int, float | None] = {32: 0.2, 64: 0.3, 224: None}  # None: no rescale
_FOG_MAPSIZE: dict[int, int] = {32: 32, 64: 64, 224: 256}
# frost1..frost5 only: the reference draws np.random.randint(5), so frost6.jpg is never used.
_FROST_FILES: tuple[str, ...] = (
    "frost1.png",
    "frost2.png",
    "frost3.png",
    "frost4.jpg",
    "frost5.jpg",
)
FROST_PACKAGE_HINT = "pip install --no-deps imagecorruptions==1.1.2"


def _check_name_severity(name: str, severity: int) -> None:
    validation.check_choice("corruption", name, CORRUPTIONS)
    validation.check_severity(severity)


def _check_size(size: int) -> None:
    if size not in _TABLES:
        raise ValueError(
            f"unsupported image size {size}; supported square sizes are "
            f"{', '.join(str(s) for s in SUPPORTED_SIZES)} (protocol.md §7.2–§7.4)"
        )


def parameters(name: str, severity: int, size: int) -> Any:
    """Return the protocol.md §7 table row for ``name`` at ``severity`` and image ``size``.

    Scalars for one-parameter corruptions, tuples otherwise. For ``zoom_blur`` the row is the
    tuple of zoom factors ``np.arange(1, stop, step)`` (so ``len`` is the factor count of the
    table); for ``pixelate`` it is the factor ``c`` (the intermediate size is ``int(size*c)``).
    """
    _check_name_severity(name, severity)
    _check_size(size)
    row = _TABLES[size][name][int(severity) - 1]
    if name == "zoom_blur":
        return tuple(float(z) for z in np.arange(1, row[0], row[1]))
    return row


# ----------------------------------------------------------------------------------------
# Small helpers
# ----------------------------------------------------------------------------------------


def _rngs(seed: int, cidx: int, severity: int, start: int, n: int) -> list[np.random.Generator]:
    """One generator per image, keyed by its dataset index (batch-size independent)."""
    return [np.random.default_rng([seed, cidx, severity, start + i]) for i in range(n)]


def _clipped_zoom_hw(img: np.ndarray, zoom_factor: float) -> np.ndarray:
    """Reference ``clipped_zoom`` on an (S, S, C) array; C may hold a whole folded batch.

    scipy's zoom with factor 1 on the last axis maps index k to exactly k, so folding
    N images × channels into that axis gives bit-identical results to per-image calls.
    """
    h = img.shape[0]
    ch = int(np.ceil(h / zoom_factor))
    top = (h - ch) // 2
    out = ndimage.zoom(img[top : top + ch, top : top + ch], (zoom_factor, zoom_factor, 1), order=1)
    trim_top = (out.shape[0] - h) // 2
    return out[trim_top : trim_top + h, trim_top : trim_top + h]


def _fold(x: np.ndarray) -> np.ndarray:
    """(N, S, S, C) -> (S, S, N*C)."""
    n, h, w, c = x.shape
    return np.ascontiguousarray(x.transpose(1, 2, 0, 3).reshape(h, w, n * c))


def _unfold(x: np.ndarray, n: int) -> np.ndarray:
    """(S, S, N*C) -> (N, S, S, C)."""
    h, w, nc = x.shape
    return x.reshape(h, w, n, nc // n).transpose(2, 0, 1, 3)


def _reflect101(idx: np.ndarray, n: int) -> np.ndarray:
    """OpenCV BORDER_REFLECT_101 index mapping (gfedcb|abcdefgh|gfedcba)."""
    if n == 1:
        return np.zeros_like(idx)
    period = 2 * n - 2
    idx = np.abs(idx) % period
    return np.where(idx >= n, period - idx, idx)


def _motion_blur_uint8(
    x: np.ndarray, radius: float, sigma: float, angles: np.ndarray
) -> np.ndarray:
    """ImageMagick ``MotionBlurImage`` on a uint8 batch (N, H, W, C), one angle per image.

    See the module docstring for what is emulated. Returns uint8, as the reference decodes
    the 8-bit PNG written by ImageMagick.
    """
    n, h, w, _ = x.shape
    width = int(2.0 * math.ceil(radius) + 1.0) if radius > 1e-12 else 3
    sig = sigma if abs(sigma) > 1e-12 else 1e-12
    i = np.arange(width, dtype=np.float64)
    kernel = np.exp(-(i * i) / (2.0 * sig * sig)) / (math.sqrt(2.0 * math.pi) * sig)
    kernel /= kernel.sum()
    rad = np.deg2rad(np.asarray(angles, dtype=np.float64))
    px = width * np.sin(rad)  # ImageMagick's point.x / point.y
    py = width * np.cos(rad)
    hyp = np.hypot(px, py)
    off_x = np.ceil(i[None, :] * py[:, None] / hyp[:, None] - 0.5).astype(np.int64)  # (N, width)
    off_y = np.ceil(i[None, :] * px[:, None] / hyp[:, None] - 0.5).astype(np.int64)
    q16 = x.astype(np.float64) * 257.0  # 8-bit PNG read into a Q16 image
    acc = np.zeros(x.shape, dtype=np.float64)
    bidx = np.arange(n)[:, None, None]
    rows0 = np.arange(h)[None, :]
    cols0 = np.arange(w)[None, :]
    for t in range(width):
        rows = np.clip(rows0 + off_y[:, t : t + 1], 0, h - 1)  # (N, H), edge virtual pixels
        cols = np.clip(cols0 + off_x[:, t : t + 1], 0, w - 1)  # (N, W)
        acc += kernel[t] * q16[bidx, rows[:, :, None], cols[:, None, :]]
    quantum = np.clip(np.floor(acc + 0.5), 0, 65535).astype(np.int64)  # ClampToQuantum
    # 8-bit PNG output of ImageMagick 6.9.11 Q16 truncates: char = quantum // 257 (checked
    # bit-exactly against Wand + libMagickWand-6.Q16 6.9.11-60).
    return (quantum // 257).astype(np.uint8)


# ----------------------------------------------------------------------------------------
# The corruptions. Each takes a uint8 batch (N, S, S, 3), the table row, the per-image
# generators and S; returns floats in 0..255 (to be truncated) or uint8.
# ----------------------------------------------------------------------------------------


def _gaussian_noise(
    x: np.ndarray, c: float, rngs: Sequence[np.random.Generator], s: int
) -> np.ndarray:
    # Generator.normal(scale=c) is c * standard_normal(); filling in place avoids a stack copy.
    noise = np.empty(x.shape, dtype=np.float64)
    for r, buf in zip(rngs, noise):
        r.standard_normal(out=buf)
    noise *= c
    noise += x / 255.0
    return np.clip(noise, 0, 1) * 255


def _shot_noise(x: np.ndarray, c: float, rngs: Sequence[np.random.Generator], s: int) -> np.ndarray:
    xf = x / 255.0
    counts = np.stack([r.poisson(xi * c) for r, xi in zip(rngs, xf)])
    return np.clip(counts / c, 0, 1) * 255


def _impulse_noise(
    x: np.ndarray, c: float, rngs: Sequence[np.random.Generator], s: int
) -> np.ndarray:
    # skimage 0.21 random_noise(mode='s&p', amount=c, salt_vs_pepper=0.5): each element is
    # flipped with probability c, to 1 (salt) or 0 (pepper) with probability 1/2.
    out = x / 255.0
    u = np.empty((x.shape[0], 2, *x.shape[1:]), dtype=np.float64)
    for r, buf in zip(rngs, u):
        r.random(out=buf)
    flipped = u[:, 0] < c
    salted = u[:, 1] < 0.5
    out[flipped & salted] = 1.0
    out[flipped & ~salted] = 0.0
    return np.clip(out, 0, 1) * 255


def _disk(radius: float, alias_blur: float) -> np.ndarray:
    """Reference ``disk``: aliased disk, normalised, then cv2.GaussianBlur (reflect-101)."""
    if radius <= 8:
        coords = np.arange(-8, 8 + 1)
        ksize = 3
    else:
        coords = np.arange(-radius, radius + 1)
        ksize = 5
    xx, yy = np.meshgrid(coords, coords)
    aliased = np.array((xx**2 + yy**2) <= radius**2, dtype=np.float32)
    aliased /= np.sum(aliased)
    # cv2.getGaussianKernel(ksize, sigma) for a float32 image: float32 taps, normalised.
    t = np.arange(ksize, dtype=np.float64) - (ksize - 1) / 2
    g = np.exp(-0.5 / (alias_blur * alias_blur) * t * t)
    g = (g / g.sum()).astype(np.float32)
    out = ndimage.correlate1d(aliased, g, axis=1, mode="mirror")
    return ndimage.correlate1d(out, g, axis=0, mode="mirror")


def _defocus_blur(
    x: np.ndarray, c: tuple, rngs: Sequence[np.random.Generator], s: int
) -> np.ndarray:
    kernel = _disk(radius=c[0], alias_blur=c[1]).astype(np.float64)
    k = kernel.shape[0]
    r = k // 2
    xf = x / 255.0
    # cv2.filter2D = correlation with reflect-101 borders (numpy 'reflect' = reflect-101).
    # The pad may exceed S for tiny images with big kernels; np.pad handles repeated reflection.
    padded = np.pad(xf, ((0, 0), (r, r), (r, r), (0, 0)), mode="reflect")
    hp, wp = padded.shape[1:3]
    shape = (sp_fft.next_fast_len(hp, real=True), sp_fft.next_fast_len(wp, real=True))
    fk = sp_fft.rfft2(kernel[::-1, ::-1], s=shape)  # flip: correlation as a convolution
    fx = sp_fft.rfft2(padded, s=shape, axes=(1, 2))
    conv = sp_fft.irfft2(fx * fk[None, :, :, None], s=shape, axes=(1, 2))
    out = conv[:, k - 1 : k - 1 + s, k - 1 : k - 1 + s, :]
    return np.clip(out, 0, 1) * 255


def _glass_blur(x: np.ndarray, c: tuple, rngs: Sequence[np.random.Generator], s: int) -> np.ndarray:
    sigma, d, iters = c
    n = x.shape[0]
    # skimage.filters.gaussian (mode 'nearest', truncate 4), per channel (§6.7).
    blurred = ndimage.gaussian_filter(
        x / 255.0, sigma=(0, sigma, sigma, 0), mode="nearest", truncate=4.0
    )
    y = np.uint8(blurred * 255)
    positions = [(h, w) for h in range(s - d, d, -1) for w in range(s - d, d, -1)]
    # Per image, per pass and position: (dx, dy) ~ randint(-d, d), drawn in loop order.
    offs = np.stack([r.integers(-d, d, size=(iters, len(positions), 2)) for r in rngs])
    bidx = np.arange(n)
    for it in range(iters):
        dxs = offs[:, it, :, 0]
        dys = offs[:, it, :, 1]
        for k, (h, w) in enumerate(positions):
            # Reference statement `x[h,w], x[h',w'] = x[h',w'], x[h,w]` on numpy views:
            # copies (h', w') into (h, w); (h', w') keeps its value (see module docstring).
            y[:, h, w] = y[bidx, h + dys[:, k], w + dxs[:, k]]
    out = ndimage.gaussian_filter(
        y / 255.0, sigma=(0, sigma, sigma, 0), mode="nearest", truncate=4.0
    )
    return np.clip(out, 0, 1) * 255


def _motion_blur(
    x: np.ndarray, c: tuple, rngs: Sequence[np.random.Generator], s: int
) -> np.ndarray:
    angles = np.array([r.uniform(-45, 45) for r in rngs])
    return _motion_blur_uint8(x, c[0], c[1], angles)


def _zoom_blur(x: np.ndarray, c: tuple, rngs: Sequence[np.random.Generator], s: int) -> np.ndarray:
    n = x.shape[0]
    xf = _fold((x / 255.0).astype(np.float32))
    out = np.zeros_like(xf)
    factors = np.arange(1, c[0], c[1])
    for z in factors:
        out += _clipped_zoom_hw(xf, z)
    xf = (xf + out) / (len(factors) + 1)
    return _unfold(np.clip(xf, 0, 1) * 255, n)


def _snow(x: np.ndarray, c: tuple, rngs: Sequence[np.random.Generator], s: int) -> np.ndarray:
    xf = np.array(x, dtype=np.float32) / 255.0
    layers = np.stack([r.normal(size=(s, s), loc=c[0], scale=c[1]) for r in rngs])  # (N,S,S)
    layers = _clipped_zoom_hw(np.ascontiguousarray(layers.transpose(1, 2, 0)), c[2])
    layers = layers.transpose(2, 0, 1)
    layers = np.where(layers < c[3], 0, layers)
    gray8 = (np.clip(layers, 0, 1) * 255).astype(np.uint8)
    angles = np.array([r.uniform(-135, -45) for r in rngs])
    blurred = _motion_blur_uint8(gray8[..., None], c[4], c[5], angles) / 255.0  # (N,S,S,1)
    # cv2.cvtColor(float32 RGB, COLOR_RGB2GRAY)
    gray = (
        xf[..., 0] * np.float32(0.299)
        + xf[..., 1] * np.float32(0.587)
        + xf[..., 2] * np.float32(0.114)
    )[..., None]
    xf = c[6] * xf + (1 - c[6]) * np.maximum(xf, gray * 1.5 + 0.5)
    return np.clip(xf + blurred + np.rot90(blurred, k=2, axes=(1, 2)), 0, 1) * 255


def _frost_dir() -> Path:
    spec = importlib.util.find_spec("imagecorruptions")  # does not import the package
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "frost needs the frost textures shipped with the 'imagecorruptions' wheel; "
            f"install it with: {FROST_PACKAGE_HINT}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "frost"
    missing = [f for f in _FROST_FILES if not (path / f).is_file()]
    if missing:
        raise RuntimeError(
            f"frost textures {missing} not found in {path}; reinstall with: {FROST_PACKAGE_HINT}"
        )
    return path


def _cv2_resize_linear(img: np.ndarray, scale: float) -> np.ndarray:
    """Emulate ``cv2.resize(img, (0, 0), fx=scale, fy=scale)`` (INTER_LINEAR) for uint8 HWC.

    OpenCV semantics: output size cvRound(dim·scale); float32 source coordinate
    (d + 0.5)/scale − 0.5 (OpenCV uses 1/fx, not the size ratio), clamped at the borders;
    weights quantised to 11 bits; horizontal pass in int32, vertical pass with the SIMD
    fixed-point formula ((b0·(h0>>4))>>16 + (b1·(h1>>4))>>16 + 2)>>2. No anti-aliasing.
    Bit-identical to opencv-python-headless 4.8.1 on the five frost textures (scales 0.2, 0.3).
    """

    def axis(n_in: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        n_out = int(np.rint(n_in * scale))
        f = ((np.arange(n_out) + 0.5) * (1.0 / scale) - 0.5).astype(np.float32)
        i0 = np.floor(f).astype(np.int64)
        a = (f - i0.astype(np.float32)).astype(np.float32)
        a = np.where(i0 < 0, np.float32(0), a)
        i0 = np.maximum(i0, 0)
        a = np.where(i0 >= n_in - 1, np.float32(0), a)
        i0 = np.minimum(i0, n_in - 1)
        i1 = np.minimum(i0 + 1, n_in - 1)
        w0 = np.rint((np.float32(1) - a) * np.float32(2048)).astype(np.int64)
        w1 = np.rint(a * np.float32(2048)).astype(np.int64)
        return i0, i1, w0, w1

    r0, r1, b0, b1 = axis(img.shape[0])
    c0, c1, a0, a1 = axis(img.shape[1])
    f = img.astype(np.int64)
    hor = f[:, c0] * a0[None, :, None] + f[:, c1] * a1[None, :, None]
    h0, h1 = hor[r0], hor[r1]
    vert = ((b0[:, None, None] * (h0 >> 4)) >> 16) + ((b1[:, None, None] * (h1 >> 4)) >> 16)
    return np.clip((vert + 2) >> 2, 0, 255).astype(np.uint8)


@functools.lru_cache(maxsize=8)
def _frost_textures(size: int) -> tuple[np.ndarray, ...]:
    path = _frost_dir()
    scale = _FROST_SCALE[size]
    out = []
    for name in _FROST_FILES:
        with Image.open(path / name) as im:
            arr = np.asarray(im.convert("RGB"))  # alpha dropped, like cv2.imread(IMREAD_COLOR)
        if scale is not None:
            arr = _cv2_resize_linear(arr, scale)
        arr.setflags(write=False)
        out.append(arr)
    return tuple(out)


def _frost(x: np.ndarray, c: tuple, rngs: Sequence[np.random.Generator], s: int) -> np.ndarray:
    textures = _frost_textures(s)
    crops = []
    for r in rngs:
        tex = textures[int(r.integers(len(_FROST_FILES)))]
        x0 = int(r.integers(0, tex.shape[0] - s))
        y0 = int(r.integers(0, tex.shape[1] - s))
        crops.append(tex[x0 : x0 + s, y0 : y0 + s])
    frost = np.stack(crops)
    return np.clip(c[0] * x.astype(np.float64) + c[1] * frost, 0, 255)


def _plasma_fractal(
    mapsize: int, wibbledecay: float, rngs: Sequence[np.random.Generator]
) -> np.ndarray:
    """Reference diamond-square plasma, batched over images (N, M, M), normalised to [0, 1]."""
    assert mapsize & (mapsize - 1) == 0
    n = len(rngs)
    maparray = np.zeros((n, mapsize, mapsize), dtype=np.float64)
    stepsize = mapsize
    wibble = 100.0

    def wibbledmean(array: np.ndarray) -> np.ndarray:
        noise = np.stack([r.uniform(-wibble, wibble, array.shape[1:]) for r in rngs])
        return array / 4 + wibble * noise

    while stepsize >= 2:
        half = stepsize // 2
        # squares
        cornerref = maparray[:, 0:mapsize:stepsize, 0:mapsize:stepsize]
        squareaccum = cornerref + np.roll(cornerref, shift=-1, axis=1)
        squareaccum += np.roll(squareaccum, shift=-1, axis=2)
        maparray[:, half:mapsize:stepsize, half:mapsize:stepsize] = wibbledmean(squareaccum)
        # diamonds
        drgrid = maparray[:, half:mapsize:stepsize, half:mapsize:stepsize]
        ulgrid = maparray[:, 0:mapsize:stepsize, 0:mapsize:stepsize]
        ltsum = drgrid + np.roll(drgrid, 1, axis=1) + (ulgrid + np.roll(ulgrid, -1, axis=2))
        maparray[:, 0:mapsize:stepsize, half:mapsize:stepsize] = wibbledmean(ltsum)
        ttsum = drgrid + np.roll(drgrid, 1, axis=2) + (ulgrid + np.roll(ulgrid, -1, axis=1))
        maparray[:, half:mapsize:stepsize, 0:mapsize:stepsize] = wibbledmean(ttsum)
        stepsize //= 2
        wibble /= wibbledecay
    maparray -= maparray.min(axis=(1, 2), keepdims=True)
    return maparray / maparray.max(axis=(1, 2), keepdims=True)


def _fog(x: np.ndarray, c: tuple, rngs: Sequence[np.random.Generator], s: int) -> np.ndarray:
    xf = x / 255.0
    max_val = xf.max(axis=(1, 2, 3), keepdims=True)
    plasma = _plasma_fractal(_FOG_MAPSIZE[s], c[1], rngs)[:, :s, :s, None]
    xf = xf + c[0] * plasma
    return np.clip(xf * max_val / (max_val + c[0]), 0, 1) * 255


def rgb_to_hsv(arr: np.ndarray) -> np.ndarray:
    """numpy port of ``skimage.color.rgb2hsv`` (float input in [0, 1], channels last).

    Same arithmetic and the same tie priority (blue over green over red when several
    channels equal the maximum) as scikit-image, written with ``np.where`` for speed.
    """
    r, g, b = arr[..., 0], arr[..., 1], arr[..., 2]
    out_v = arr.max(-1)
    delta = np.ptp(arr, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out_s = np.where(delta == 0.0, 0.0, delta / out_v)
        h = np.where(r == out_v, (g - b) / delta, 0.0)
        h = np.where(g == out_v, 2.0 + (b - r) / delta, h)
        h = np.where(b == out_v, 4.0 + (r - g) / delta, h)
        out_h = (h / 6.0) % 1.0
    out_h = np.where(delta == 0.0, 0.0, out_h)
    return np.stack([out_h, out_s, out_v], axis=-1)


def hsv_to_rgb(hsv: np.ndarray) -> np.ndarray:
    """numpy port of ``skimage.color.hsv2rgb``."""
    h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    hi = np.floor(h * 6)
    f = h * 6 - hi
    p = v * (1 - s)
    q = v * (1 - f * s)
    t = v * (1 - (1 - f) * s)
    hi = hi.astype(np.uint8) % 6
    choices = np.stack(
        [
            np.stack((v, t, p), axis=-1),
            np.stack((q, v, p), axis=-1),
            np.stack((p, v, t), axis=-1),
            np.stack((p, q, v), axis=-1),
            np.stack((t, p, v), axis=-1),
            np.stack((v, p, q), axis=-1),
        ]
    )
    return np.take_along_axis(choices, hi[None, ..., None].astype(np.intp), axis=0)[0]


def _brightness(x: np.ndarray, c: float, rngs: Sequence[np.random.Generator], s: int) -> np.ndarray:
    hsv = rgb_to_hsv(x / 255.0)
    hsv[..., 2] = np.clip(hsv[..., 2] + c, 0, 1)
    return np.clip(hsv_to_rgb(hsv), 0, 1) * 255


def _contrast(x: np.ndarray, c: float, rngs: Sequence[np.random.Generator], s: int) -> np.ndarray:
    xf = x / 255.0
    means = np.mean(xf, axis=(1, 2), keepdims=True)
    return np.clip((xf - means) * c + means, 0, 1) * 255


def _get_affine_transform(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """``cv2.getAffineTransform``: 2×3 matrix M with dst = M·[src; 1] (float64)."""
    a = np.zeros((6, 6))
    b = np.zeros(6)
    for i in range(3):
        a[i, 0:2] = src[i]
        a[i, 2] = 1
        a[i + 3, 3:5] = src[i]
        a[i + 3, 5] = 1
        b[i] = dst[i, 0]
        b[i + 3] = dst[i, 1]
    return np.linalg.solve(a, b).reshape(2, 3)


def _invert_affine(m: np.ndarray) -> np.ndarray:
    """``cv2.invertAffineTransform``."""
    det = m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]
    d = 1.0 / det if det != 0 else 0.0
    a11, a22 = m[1, 1] * d, m[0, 0] * d
    a12, a21 = -m[0, 1] * d, -m[1, 0] * d
    b1 = -a11 * m[0, 2] - a12 * m[1, 2]
    b2 = -a21 * m[0, 2] - a22 * m[1, 2]
    return np.array([[a11, a12, b1], [a21, a22, b2]])


def _warp_affine_reflect101(img: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``cv2.warpAffine(img, m, (W, H), INTER_LINEAR, BORDER_REFLECT_101)`` for float32 HWC.

    Emulates OpenCV's fixed point: coordinates = (round(M·1024) sums + 16) >> 5, i.e. 1/32-pixel
    sub-pixel positions, with float32 bilinear weights from the 32×32 interpolation table.
    """
    h, w = img.shape[:2]
    inv = _invert_affine(m)
    xs = np.arange(w, dtype=np.float64)
    ys = np.arange(h, dtype=np.float64)
    adelta = np.rint(inv[0, 0] * xs * 1024).astype(np.int64)
    bdelta = np.rint(inv[1, 0] * xs * 1024).astype(np.int64)
    x0 = np.rint((inv[0, 1] * ys + inv[0, 2]) * 1024).astype(np.int64) + 16
    y0 = np.rint((inv[1, 1] * ys + inv[1, 2]) * 1024).astype(np.int64) + 16
    xq = (x0[:, None] + adelta[None, :]) >> 5  # (H, W) in 1/32 pixels
    yq = (y0[:, None] + bdelta[None, :]) >> 5
    sx, fx = xq >> 5, (xq & 31).astype(np.float32) / np.float32(32)
    sy, fy = yq >> 5, (yq & 31).astype(np.float32) / np.float32(32)
    one = np.float32(1)
    w00 = ((one - fy) * (one - fx))[..., None]
    w01 = ((one - fy) * fx)[..., None]
    w10 = (fy * (one - fx))[..., None]
    w11 = (fy * fx)[..., None]
    xa, xb = _reflect101(sx, w), _reflect101(sx + 1, w)
    ya, yb = _reflect101(sy, h), _reflect101(sy + 1, h)
    return img[ya, xa] * w00 + img[ya, xb] * w01 + img[yb, xa] * w10 + img[yb, xb] * w11


def _elastic_transform(
    x: np.ndarray, c: tuple, rngs: Sequence[np.random.Generator], s: int
) -> np.ndarray:
    n = x.shape[0]
    image = np.array(x, dtype=np.float32) / 255.0
    center_square = np.float32((s, s)) // 2
    square_size = s // 3
    pts1 = np.float32(
        [
            center_square + square_size,
            [center_square[0] + square_size, center_square[1] - square_size],
            center_square - square_size,
        ]
    )
    warped = np.empty_like(image)
    noise = np.empty((n, 2, s, s), dtype=np.float64)
    for i, r in enumerate(rngs):
        pts2 = pts1 + r.uniform(-c[2], c[2], size=pts1.shape).astype(np.float32)
        m = _get_affine_transform(pts1.astype(np.float64), pts2.astype(np.float64))
        warped[i] = _warp_affine_reflect101(image[i], m)
        noise[i] = r.uniform(-1, 1, size=(2, s, s))  # dx field, then dy field
    # skimage gaussian(sigma, mode='reflect', truncate=3) per field, batched (sigma 0 on n, f).
    disp = (
        ndimage.gaussian_filter(noise, sigma=(0, 0, c[1], c[1]), mode="reflect", truncate=3) * c[0]
    ).astype(np.float32)
    dx = disp[:, 0, :, :, None].astype(np.float64)
    dy = disp[:, 1, :, :, None].astype(np.float64)
    # Per image (3-D, as the reference): a batched 4-D call would interpolate over 16 instead
    # of 8 corners for the same bytes.
    yy, xx, zz = np.meshgrid(np.arange(s), np.arange(s), np.arange(3), indexing="ij")
    zcoord = zz.ravel().astype(np.float64)
    out = np.empty_like(image)
    for i in range(n):
        coords = np.stack([(yy + dy[i]).ravel(), (xx + dx[i]).ravel(), zcoord])
        out[i] = ndimage.map_coordinates(warped[i], coords, order=1, mode="reflect").reshape(
            s, s, 3
        )
    return np.clip(out, 0, 1) * 255


def _pixelate(x: np.ndarray, c: float, rngs: Sequence[np.random.Generator], s: int) -> np.ndarray:
    small = int(s * c)
    out = np.empty_like(x)
    for i, img in enumerate(x):
        im = Image.fromarray(img).resize((small, small), Image.Resampling.BOX)
        out[i] = np.asarray(im.resize((s, s), Image.Resampling.BOX))
    return out


def _jpeg_compression(
    x: np.ndarray, c: int, rngs: Sequence[np.random.Generator], s: int
) -> np.ndarray:
    out = np.empty_like(x)
    for i, img in enumerate(x):
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, "JPEG", quality=c)
        buf.seek(0)
        with Image.open(buf) as im:
            out[i] = np.asarray(im.convert("RGB"))
    return out


_FUNCS = {
    "gaussian_noise": _gaussian_noise,
    "shot_noise": _shot_noise,
    "impulse_noise": _impulse_noise,
    "defocus_blur": _defocus_blur,
    "glass_blur": _glass_blur,
    "motion_blur": _motion_blur,
    "zoom_blur": _zoom_blur,
    "snow": _snow,
    "frost": _frost,
    "fog": _fog,
    "brightness": _brightness,
    "contrast": _contrast,
    "elastic_transform": _elastic_transform,
    "pixelate": _pixelate,
    "jpeg_compression": _jpeg_compression,
}


def corrupt(images: Any, name: str, severity: int, *, seed: int = 0, index_offset: int = 0) -> Any:
    """Apply Hendrycks corruption ``name`` at ``severity`` (1..5) to a uint8 batch.

    Args:
        images: uint8 array of shape (N, S, S, 3), numpy or torch (any device); S selects the
            parameter table of protocol.md §7 (32 → §7.2, 64 → §7.4, 224 → §7.3).
        name: one of :data:`CORRUPTIONS`.
        severity: 1..5.
        seed: non-negative base seed.
        index_offset: dataset index of ``images[0]``. Image ``i`` draws its randomness from
            ``np.random.default_rng([seed, CORRUPTIONS.index(name), severity, index_offset+i])``,
            so corrupting a dataset in chunks (passing each chunk's start index) yields exactly
            the bytes of corrupting it in one call; batch size never changes the output.

    Returns:
        The corrupted batch, same type, shape, dtype (uint8) and device as ``images``. Values
        are truncated to uint8 as the reference's ``np.uint8(...)`` cast does.
    """
    _check_name_severity(name, severity)
    severity = int(severity)
    validation.check_seed(seed)
    if isinstance(index_offset, bool) or int(index_offset) != index_offset or index_offset < 0:
        raise ValueError(f"index_offset must be a non-negative int, got {index_offset!r}")

    torch_in = not isinstance(images, np.ndarray)
    if torch_in:
        import torch

        if not isinstance(images, torch.Tensor):
            raise TypeError(
                f"images must be a numpy array or torch tensor, got {type(images).__name__}"
            )
        device = images.device
        arr = images.detach().cpu().numpy()
    else:
        arr = images
    if arr.dtype != np.uint8:
        raise ValueError(f"images must be uint8, got dtype {arr.dtype}")
    if arr.ndim != 4 or arr.shape[3] != 3 or arr.shape[1] != arr.shape[2]:
        raise ValueError(f"images must have shape (N, S, S, 3), got {tuple(arr.shape)}")
    size = int(arr.shape[1])
    _check_size(size)

    n = arr.shape[0]
    if n == 0:
        out = arr.copy()
    else:
        x = np.ascontiguousarray(arr)
        row = _TABLES[size][name][severity - 1]
        rngs = _rngs(int(seed), CORRUPTIONS.index(name), severity, int(index_offset), n)
        res = _FUNCS[name](x, row, rngs, size)
        out = res if res.dtype == np.uint8 else np.uint8(np.clip(res, 0, 255))
        out = np.ascontiguousarray(out)
    if torch_in:
        import torch

        return torch.from_numpy(out).to(device)
    return out
