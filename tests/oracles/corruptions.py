"""A plain per-image transcription of the Hendrycks corruption code (protocol.md §7.1): the
oracle of ``stamplib.data.corruptions``.

Each ``_reference_<name>`` corrupts one uint8 HWC image as the reference code does, drawing
from the same per-image generator as the suite,
``np.random.default_rng([seed, corruption_index, severity, index])``, in the same order, so
the outputs are directly comparable (tests/data/test_corruptions.py asserts identical bytes;
benchmarks/corruptions.py times both). OpenCV / ImageMagick calls of the original are
replaced by plain scipy/numpy code (defocus: direct ``ndimage.correlate``; motion blur: a
per-image tap loop) or by the suite's cv2 emulation helpers where a second transcription
would add nothing (affine warp, frost texture loading, the defocus disk kernel).

It lives in the library rather than in tests/ because the benchmark times it too, and
benchmarks import nothing from tests/. Deliberately slow: nothing else calls it.
"""

from __future__ import annotations

import io
import math

import numpy as np
from PIL import Image
from scipy import ndimage
from scipy.ndimage import map_coordinates
from scipy.ndimage import zoom as scizoom

from stamplib.data import corruptions as C
from stamplib.data.corruptions import CORRUPTIONS


def _rng(seed: int, name: str, sev: int, i: int) -> np.random.Generator:
    return np.random.default_rng([seed, CORRUPTIONS.index(name), sev, i])


def _clipped_zoom(img: np.ndarray, zoom_factor: float) -> np.ndarray:
    h = img.shape[0]
    ch = int(np.ceil(h / zoom_factor))
    top = (h - ch) // 2
    img = scizoom(img[top : top + ch, top : top + ch], (zoom_factor, zoom_factor, 1), order=1)
    trim_top = (img.shape[0] - h) // 2
    return img[trim_top : trim_top + h, trim_top : trim_top + h]


def _motion(img: np.ndarray, radius: float, sigma: float, angle: float) -> np.ndarray:
    """ImageMagick MotionBlurImage on one uint8 HWC image, one tap at a time."""
    h, w = img.shape[:2]
    width = int(2 * math.ceil(radius) + 1)
    kernel = [math.exp(-(i * i) / (2 * sigma * sigma)) for i in range(width)]
    total = sum(kernel)
    px, py = width * math.sin(math.radians(angle)), width * math.cos(math.radians(angle))
    hyp = math.hypot(px, py)
    acc = np.zeros(img.shape)
    for i in range(width):
        ox = math.ceil(i * py / hyp - 0.5)
        oy = math.ceil(i * px / hyp - 0.5)
        rows = np.clip(np.arange(h) + oy, 0, h - 1)
        cols = np.clip(np.arange(w) + ox, 0, w - 1)
        acc += kernel[i] / total * img[rows][:, cols].astype(np.float64) * 257
    return (np.floor(acc + 0.5).astype(np.int64) // 257).astype(np.uint8)


def _reference_gaussian_noise(x, c, r):
    x = np.array(x) / 255.0
    return np.clip(x + r.normal(size=x.shape, scale=c), 0, 1) * 255


def _reference_shot_noise(x, c, r):
    x = np.array(x) / 255.0
    return np.clip(r.poisson(x * c) / c, 0, 1) * 255


def _reference_impulse_noise(x, c, r):
    out = np.array(x) / 255.0
    u = r.random((2, *out.shape))
    flipped, salted = u[0] < c, u[1] < 0.5
    out[flipped & salted] = 1
    out[flipped & ~salted] = 0
    return np.clip(out, 0, 1) * 255


def _reference_defocus_blur(x, c, r):
    x = np.array(x) / 255.0
    kernel = C._disk(radius=c[0], alias_blur=c[1]).astype(np.float64)
    channels = [ndimage.correlate(x[:, :, d], kernel, mode="mirror") for d in range(3)]
    return np.clip(np.array(channels).transpose((1, 2, 0)), 0, 1) * 255


def _reference_glass_blur(x, c, r):
    sigma, d, iters = c
    s = x.shape[0]
    x = np.uint8(
        ndimage.gaussian_filter(np.array(x) / 255.0, (sigma, sigma, 0), mode="nearest") * 255
    )
    offs = r.integers(-d, d, size=(iters, (s - 2 * d) ** 2, 2))
    for i in range(iters):
        k = 0
        for h in range(s - d, d, -1):
            for w in range(s - d, d, -1):
                dx, dy = offs[i, k]
                k += 1
                h_prime, w_prime = h + dy, w + dx
                # swap (as written in the reference; numpy views make it a copy)
                x[h, w], x[h_prime, w_prime] = x[h_prime, w_prime], x[h, w]
    return (
        np.clip(ndimage.gaussian_filter(x / 255.0, (sigma, sigma, 0), mode="nearest"), 0, 1) * 255
    )


def _reference_motion_blur(x, c, r):
    return _motion(np.array(x), c[0], c[1], r.uniform(-45, 45))


def _reference_zoom_blur(x, c, r):
    x = (np.array(x) / 255.0).astype(np.float32)
    out = np.zeros_like(x)
    factors = np.arange(1, c[0], c[1])
    for z in factors:
        out += _clipped_zoom(x, z)
    x = (x + out) / (len(factors) + 1)
    return np.clip(x, 0, 1) * 255


def _reference_snow(x, c, r):
    s = x.shape[0]
    x = np.array(x, dtype=np.float32) / 255.0
    snow = r.normal(size=x.shape[:2], loc=c[0], scale=c[1])
    snow = _clipped_zoom(snow[..., np.newaxis], c[2])
    snow[snow < c[3]] = 0
    snow = (np.clip(snow, 0, 1) * 255).astype(np.uint8)
    snow = _motion(snow, c[4], c[5], r.uniform(-135, -45)) / 255.0
    gray = (
        x[..., 0] * np.float32(0.299)
        + x[..., 1] * np.float32(0.587)
        + x[..., 2] * np.float32(0.114)
    )
    x = c[6] * x + (1 - c[6]) * np.maximum(x, gray.reshape(s, s, 1) * 1.5 + 0.5)
    return np.clip(x + snow + np.rot90(snow, k=2), 0, 1) * 255


def _reference_frost(x, c, r):
    s = x.shape[0]
    frost = C._frost_textures(s)[r.integers(5)]
    x_start, y_start = r.integers(0, frost.shape[0] - s), r.integers(0, frost.shape[1] - s)
    frost = frost[x_start : x_start + s, y_start : y_start + s]
    return np.clip(c[0] * np.array(x) + c[1] * frost, 0, 255)


def _plasma_fractal(mapsize, wibbledecay, r):
    maparray = np.empty((mapsize, mapsize), dtype=np.float64)
    maparray[0, 0] = 0
    stepsize = mapsize
    wibble = 100.0

    def wibbledmean(array):
        return array / 4 + wibble * r.uniform(-wibble, wibble, array.shape)

    def fillsquares():
        cornerref = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        squareaccum = cornerref + np.roll(cornerref, shift=-1, axis=0)
        squareaccum += np.roll(squareaccum, shift=-1, axis=1)
        maparray[stepsize // 2 : mapsize : stepsize, stepsize // 2 : mapsize : stepsize] = (
            wibbledmean(squareaccum)
        )

    def filldiamonds():
        drgrid = maparray[stepsize // 2 : mapsize : stepsize, stepsize // 2 : mapsize : stepsize]
        ulgrid = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        ltsum = drgrid + np.roll(drgrid, 1, axis=0) + (ulgrid + np.roll(ulgrid, -1, axis=1))
        maparray[0:mapsize:stepsize, stepsize // 2 : mapsize : stepsize] = wibbledmean(ltsum)
        ttsum = drgrid + np.roll(drgrid, 1, axis=1) + (ulgrid + np.roll(ulgrid, -1, axis=0))
        maparray[stepsize // 2 : mapsize : stepsize, 0:mapsize:stepsize] = wibbledmean(ttsum)

    while stepsize >= 2:
        fillsquares()
        filldiamonds()
        stepsize //= 2
        wibble /= wibbledecay
    maparray -= maparray.min()
    return maparray / maparray.max()


def _reference_fog(x, c, r):
    s = x.shape[0]
    x = np.array(x) / 255.0
    max_val = x.max()
    x += c[0] * _plasma_fractal({32: 32, 64: 64, 224: 256}[s], c[1], r)[:s, :s][..., np.newaxis]
    return np.clip(x * max_val / (max_val + c[0]), 0, 1) * 255


def _rgb2hsv(arr):
    out = np.empty_like(arr)
    out_v = arr.max(-1)
    delta = np.ptp(arr, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out_s = delta / out_v
    out_s[delta == 0.0] = 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        idx = arr[..., 0] == out_v
        out[idx, 0] = (arr[idx, 1] - arr[idx, 2]) / delta[idx]
        idx = arr[..., 1] == out_v
        out[idx, 0] = 2.0 + (arr[idx, 2] - arr[idx, 0]) / delta[idx]
        idx = arr[..., 2] == out_v
        out[idx, 0] = 4.0 + (arr[idx, 0] - arr[idx, 1]) / delta[idx]
    out_h = (out[..., 0] / 6.0) % 1.0
    out_h[delta == 0.0] = 0.0
    out[..., 0], out[..., 1], out[..., 2] = out_h, out_s, out_v
    return out


def _hsv2rgb(arr):
    hi = np.floor(arr[..., 0] * 6)
    f = arr[..., 0] * 6 - hi
    p = arr[..., 2] * (1 - arr[..., 1])
    q = arr[..., 2] * (1 - f * arr[..., 1])
    t = arr[..., 2] * (1 - (1 - f) * arr[..., 1])
    v = arr[..., 2]
    hi = np.stack([hi, hi, hi], axis=-1).astype(np.uint8) % 6
    return np.choose(
        hi,
        np.stack(
            [
                np.stack((v, t, p), axis=-1),
                np.stack((q, v, p), axis=-1),
                np.stack((p, v, t), axis=-1),
                np.stack((p, q, v), axis=-1),
                np.stack((t, p, v), axis=-1),
                np.stack((v, p, q), axis=-1),
            ]
        ),
    )


def _reference_brightness(x, c, r):
    x = _rgb2hsv(np.array(x) / 255.0)
    x[:, :, 2] = np.clip(x[:, :, 2] + c, 0, 1)
    return np.clip(_hsv2rgb(x), 0, 1) * 255


def _reference_contrast(x, c, r):
    x = np.array(x) / 255.0
    means = np.mean(x, axis=(0, 1), keepdims=True)
    return np.clip((x - means) * c + means, 0, 1) * 255


def _reference_elastic_transform(image, c, r):
    image = np.array(image, dtype=np.float32) / 255.0
    shape = image.shape
    shape_size = shape[:2]
    center_square = np.float32(shape_size) // 2
    square_size = min(shape_size) // 3
    pts1 = np.float32(
        [
            center_square + square_size,
            [center_square[0] + square_size, center_square[1] - square_size],
            center_square - square_size,
        ]
    )
    pts2 = pts1 + r.uniform(-c[2], c[2], size=pts1.shape).astype(np.float32)
    m = C._get_affine_transform(pts1.astype(np.float64), pts2.astype(np.float64))
    image = C._warp_affine_reflect101(image, m)
    dx = (
        ndimage.gaussian_filter(r.uniform(-1, 1, size=shape[:2]), c[1], mode="reflect", truncate=3)
        * c[0]
    ).astype(np.float32)
    dy = (
        ndimage.gaussian_filter(r.uniform(-1, 1, size=shape[:2]), c[1], mode="reflect", truncate=3)
        * c[0]
    ).astype(np.float32)
    dx, dy = dx[..., np.newaxis], dy[..., np.newaxis]
    x, y, z = np.meshgrid(np.arange(shape[1]), np.arange(shape[0]), np.arange(shape[2]))
    indices = np.reshape(y + dy, (-1, 1)), np.reshape(x + dx, (-1, 1)), np.reshape(z, (-1, 1))
    return (
        np.clip(map_coordinates(image, indices, order=1, mode="reflect").reshape(shape), 0, 1) * 255
    )


def _reference_pixelate(x, c, r):
    s = x.shape[0]
    im = Image.fromarray(x).resize((int(s * c), int(s * c)), Image.Resampling.BOX)
    return np.asarray(im.resize((s, s), Image.Resampling.BOX))


def _reference_jpeg_compression(x, c, r):
    output = io.BytesIO()
    Image.fromarray(x).save(output, "JPEG", quality=c)
    return np.asarray(Image.open(output))


REFERENCE = {name: globals()[f"_reference_{name}"] for name in CORRUPTIONS}


def reference(x: np.ndarray, name: str, sev: int, seed: int = 0, index_offset: int = 0) -> np.ndarray:
    """Corruption ``name`` at ``sev`` of every image of ``x`` (uint8 N×S×S×3), one image at a
    time, image ``i`` drawing from the suite's per-image generator of index ``index_offset + i``."""
    s = x.shape[1]
    row = C._TABLES[s][name][sev - 1]
    return np.stack(
        [np.uint8(REFERENCE[name](img, row, _rng(seed, name, sev, index_offset + i))) for i, img in enumerate(x)]
    )
