"""Batched test-time view augmentations, generated on the tensor's device in one call.

Every image of every view gets its own random parameters (stamp.md §3: the authors sample
inside the dataset's ``__getitem__``, i.e. independently per image and per view); all draws
come from the generator passed in, never from the global RNG.

* :func:`cotta_augment` — the CoTTA test-time transform (stamp.md §3, CIFAR10-C): clip,
  colour jitter in a random order (brightness, contrast, saturation, hue, gamma), edge pad by
  size/2, random affine, Gaussian blur k=5, centre crop, h-flip, N(0, 0.005²) noise, clip.
* :func:`cotta_augment_shared` — the same transform with ONE draw of random parameters per
  call, shared by the whole batch (what torchvision does to a batch tensor; CoTTA and RoTTA
  augment their batch that way, baselines.md §4 step 4, §7). The Gaussian noise stays
  per pixel.
* :func:`cotta_augment_batch` — either of the two, optionally applied in mean/std-normalised
  space (the ImageNet quirk of CoTTA and RoTTA).
* :func:`cotta_augment_calls` — several successive :func:`cotta_augment_batch` calls in one
  pass, with the same draws (CoTTA's 32 teacher views in one forward).
* :func:`crop_flip_augment` — random crop with zero (``fill``) padding of 4 px, then h-flip
  (CIFAR100-C, the class-split sets, ImageNet-C).

Three shortcuts keep the CoTTA transform cheap without changing a single draw or output
(tests/test_views.py checks the result against a plain transcription):

* colour jitter applies each op only to the images that have it in the current slot of their
  random order, so the five slots cost about five whole-batch op applications, not 25;
* affine and blur are computed only where the centre crop needs them: the affine output of
  the crop plus a halo of kernel//2 pixels, then a "valid" blur. The halo pixels lie at least
  size/2 − kernel//2 pixels inside the padded image, so the reflect padding of the full-image
  blur never reaches the crop: the crop is the same, and 3–4x fewer pixels are computed;
* all random parameters are drawn first, in the transform's order (none depends on the
  pixels), then the images are processed in chunks on the CPU, whose temporaries stay in
  the cache; :func:`make_views` writes the K−1 views straight into its output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

ViewKind = Literal["cotta", "crop_flip"]

_BLUR_KERNEL = 5  # CoTTA's GaussianBlur(kernel_size=5)


def _gpu_paths(x: torch.Tensor) -> bool:
    """Whether the views take their GPU code paths for ``x`` (masked selection instead of index
    lists, so no host synchronisation; whole batches instead of cache-sized chunks).
    ``benchmarks/launch_count.py --gpu-paths`` replaces it to count those paths on a CPU."""
    return x.device.type == "cuda"


def _scaled(raw: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """U(0, 1) draws mapped to U(low, high)."""
    return raw * (high - low) + low


def _draws(n: int, shared: bool) -> int:
    """How many parameter sets to draw for a batch of ``n``: one per image, or one in all."""
    return 1 if shared else n


def _gray(x: torch.Tensor) -> torch.Tensor:
    r, gch, b = x.unbind(dim=1)
    return (0.2989 * r + 0.587 * gch + 0.114 * b).unsqueeze(1)


def _hue_shift(img: torch.Tensor, hue: torch.Tensor) -> torch.Tensor:
    """RGB -> HSV, h += hue (mod 1), HSV -> RGB, with torchvision's arithmetic (_rgb2hsv,
    _hsv2rgb) kept value for value; only how the values are picked is cheaper."""
    r, g, b = img.unbind(dim=1)
    maxc = torch.maximum(torch.maximum(r, g), b)
    minc = torch.minimum(torch.minimum(r, g), b)
    eqc = maxc == minc
    cr = maxc - minc
    s = cr / maxc.masked_fill(eqc, 1.0)
    cr_div = cr.masked_fill(eqc, 1.0)
    rc, gc, bc = (maxc - r) / cr_div, (maxc - g) / cr_div, (maxc - b) / cr_div
    # torchvision sums three masked terms; the two unpicked ones are exact zeros.
    h = torch.where(maxc == r, bc - gc, torch.where(maxc == g, 2.0 + rc - bc, 4.0 + gc - rc))
    h = torch.remainder(torch.fmod(h / 6.0 + 1.0, 1.0) + hue, 1.0)
    v = maxc
    h6 = h * 6.0
    sector = torch.floor(h6)
    f = h6 - sector
    p = (v * (1.0 - s)).clamp(0.0, 1.0)
    q = (v * (1.0 - s * f)).clamp(0.0, 1.0)
    t = (v * (1.0 - s * (1.0 - f))).clamp(0.0, 1.0)
    planes = torch.stack((v, q, p, t), dim=1)  # [N, 4, H, W]
    table = torch.tensor(_HSV_SECTOR_PLANES, device=img.device)
    return planes.gather(1, table[sector.to(torch.int64)].permute(0, 3, 1, 2))


# Which of the planes (v, q, p, t) gives r, g and b in each hue sector (torchvision's
# _hsv2rgb table as indices, so one gather picks all three channels). Sector 6 (h·6 rounded up
# to 6.0) is sector 0 with f = 0, as torchvision's ``i % 6`` makes it.
_HSV_SECTOR_PLANES = ((0, 3, 2), (1, 0, 2), (2, 0, 3), (2, 1, 0), (3, 2, 0), (0, 2, 1), (0, 3, 2))


def _jitter_op(op: int, img: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """One ColorJitterPro op (0 brightness, 1 contrast, 2 saturation, 3 hue, 4 gamma) with its
    factor, one row per image of ``img`` (or one shared)."""
    if op == 0:
        return (img * factor).clamp(0.0, 1.0)
    if op == 1:
        mean = _gray(img).mean(dim=(1, 2, 3), keepdim=True)
        return (factor * img + (1.0 - factor) * mean).clamp(0.0, 1.0)
    if op == 2:
        return (factor * img + (1.0 - factor) * _gray(img)).clamp(0.0, 1.0)
    if op == 3:
        return _hue_shift(img, factor)
    return img.clamp(1e-8, 1.0).pow(factor).clamp(0.0, 1.0)


def _jitter(x: torch.Tensor, factors: tuple[torch.Tensor, ...], order: torch.Tensor) -> torch.Tensor:
    """CoTTA's ColorJitterPro: the five ops in each image's own order (``order`` [d, 5]); one
    row of ``factors``/``order`` per image, or a single row shared by the batch."""
    if order.shape[0] == 1:
        for op in order[0].tolist():
            x = _jitter_op(op, x, factors[op])
        return x
    if _gpu_paths(x):
        return _jitter_masked(x, factors, order)
    for slot in range(5):
        # Every image has exactly one op in this slot: each op runs on its own images only.
        out = torch.empty_like(x)
        for op in range(5):
            idx = (order[:, slot] == op).nonzero().squeeze(1)
            if idx.numel():
                own = factors[op].index_select(0, idx)
                out.index_copy_(0, idx, _jitter_op(op, x.index_select(0, idx), own))
        x = out
    return x


def _jitter_masked(x: torch.Tensor, factors: tuple[torch.Tensor, ...], order: torch.Tensor) -> torch.Tensor:
    """:func:`_jitter` with one row per image, without a host synchronisation: every op runs on
    every image and each image keeps its own op's result. Five times the arithmetic of the index
    path, which a GPU does not notice at 32 px, and the kept values are the same numbers."""
    for slot in range(5):
        picked = order[:, slot].view(-1, 1, 1, 1)
        out = x
        for op in range(5):
            out = torch.where(picked == op, _jitter_op(op, x, factors[op]), out)
        x = out
    return x


def _flip_rows(x: torch.Tensor, flip: torch.Tensor) -> torch.Tensor:
    """Mirror the images whose ``flip`` [d, 1, 1, 1] is set (d = 1: all or none), in place on a
    CPU (only those images are copied); on a GPU without the host synchronisation of nonzero."""
    if _gpu_paths(x):
        return torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)
    flipped = flip.view(-1).expand(x.shape[0]).nonzero().squeeze(1)
    x.index_copy_(0, flipped, x.index_select(0, flipped).flip(-1))
    return x


def _affine_theta_from(raw: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """Inverse affine maps [n, 2, 3] for an h×w image from four U(0, 1) draws ``raw`` [4, n]:
    rotation ±15°, translation ≤ 1/16 of the size (whole pixels), scale 0.9–1.1 (torchvision
    RandomAffine as CoTTA configures it)."""
    angle = _scaled(raw[0], -15.0, 15.0) * math.pi / 180.0
    max_dx, max_dy = w / 16.0, h / 16.0
    tx = torch.round(_scaled(raw[1], -max_dx, max_dx))
    ty = torch.round(_scaled(raw[2], -max_dy, max_dy))
    scale = _scaled(raw[3], 0.9, 1.1)
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    # Inverse map in normalised coordinates: input = R(-θ)/s · (output − t).
    t_x, t_y = tx * 2.0 / w, ty * 2.0 / h
    return torch.stack(
        (
            torch.stack((cos, sin, -(cos * t_x + sin * t_y)), dim=1),
            torch.stack((-sin, cos, -(-sin * t_x + cos * t_y)), dim=1),
        ),
        dim=1,
    )


def _affine_grid_window(
    theta: torch.Tensor, size: tuple[int, int], top: int, left: int, out_h: int, out_w: int
) -> torch.Tensor:
    """``F.affine_grid(theta, size, align_corners=False)[:, top:top+out_h, left:left+out_w]``
    without computing the rest: ATen's base coordinates, sliced, times θᵀ (bit-identical)."""
    h, w = size
    xs = torch.linspace(-1, 1, w, device=theta.device) * (w - 1) / w
    ys = torch.linspace(-1, 1, h, device=theta.device) * (h - 1) / h
    base = torch.stack(
        (
            xs[left : left + out_w].view(1, -1).expand(out_h, out_w),
            ys[top : top + out_h].view(-1, 1).expand(out_h, out_w),
            torch.ones(out_h, out_w, device=theta.device),
        ),
        dim=-1,
    )
    grid = torch.matmul(base.view(1, out_h * out_w, 3), theta.transpose(1, 2))
    return grid.view(theta.shape[0], out_h, out_w, 2)


def _blur_kernels_from(raw_sigma: torch.Tensor, kernel: int = _BLUR_KERNEL) -> torch.Tensor:
    """Normalised 1-D Gaussian kernels [n, kernel] from the U(0, 1) draws of σ, one per row:
    σ ~ U(0.001, 0.5) (torchvision's rule)."""
    sigma = _scaled(raw_sigma, 0.001, 0.5)
    half = (kernel - 1) / 2
    pos = torch.linspace(-half, half, kernel, device=raw_sigma.device)
    k1d = torch.exp(-0.5 * (pos.view(1, -1) / sigma.view(-1, 1)) ** 2)
    return k1d / k1d.sum(dim=1, keepdim=True)


def _blur_valid(x: torch.Tensor, k1d: torch.Tensor) -> torch.Tensor:
    """Separable blur with one kernel per image (``k1d`` [n, k]) and no padding:
    [n, c, h, w] -> [n, c, h−k+1, w−k+1]."""
    n, c, h, w = x.shape
    kernel = k1d.shape[1]
    k1d = k1d.repeat_interleave(c, dim=0)
    flat = F.conv2d(x.reshape(1, n * c, h, w), k1d.view(n * c, 1, 1, kernel), groups=n * c)
    flat = F.conv2d(flat, k1d.view(n * c, 1, kernel, 1), groups=n * c)
    return flat.view(n, c, h - kernel + 1, w - kernel + 1)


def _hflip(x: torch.Tensor, g: torch.Generator, p: float = 0.5, shared: bool = False) -> torch.Tensor:
    flip = (torch.rand(_draws(x.shape[0], shared), generator=g, device=x.device) < p).view(-1, 1, 1, 1)
    return torch.where(flip, x.flip(-1), x)


@dataclass(frozen=True)
class _UniformDraws:
    """The U(0, 1) draws behind one CoTTA call's parameters, ``d`` rows, drawn in the
    transform's order: the five colour factors, the op order's sort keys, the affine's angle,
    shifts and scale, the blur's σ, the flip. Drawing them is all a call does with the
    generator before its noise, so many calls' draws can be made first and turned into
    parameters in one pass (a GPU then launches ~12 kernels per call instead of ~60)."""

    factors: torch.Tensor  # [5, d]
    order: torch.Tensor  # [d, 5] sort keys
    affine: torch.Tensor  # [4, d]
    sigma: torch.Tensor  # [d]
    flip: torch.Tensor  # [d]

    @staticmethod
    def cat(parts: list[_UniformDraws]) -> _UniformDraws:
        return _UniformDraws(
            torch.cat([p.factors for p in parts], dim=1), torch.cat([p.order for p in parts]),
            torch.cat([p.affine for p in parts], dim=1), torch.cat([p.sigma for p in parts]),
            torch.cat([p.flip for p in parts]),
        )


def _draw_uniform(d: int, g: torch.Generator, device) -> _UniformDraws:
    def rand(*shape: int) -> torch.Tensor:
        return torch.rand(shape, generator=g, device=device)
    factors = torch.stack([rand(d) for _ in range(5)])
    order = rand(d, 5)
    affine = torch.stack([rand(d) for _ in range(4)])
    return _UniformDraws(factors, order, affine, rand(d), rand(d))


@dataclass(frozen=True)
class _CottaDraws:
    """Every random parameter of one CoTTA call, one row per draw (per image, or one shared).

    None of them depends on the pixels, so they are drawn up front in the transform's order
    (jitter, affine, blur, flip; the noise follows) and the images can then be processed in
    chunks with the very same parameters.
    """

    factors: tuple[torch.Tensor, ...]  # brightness, contrast, saturation, hue, gamma
    order: torch.Tensor  # [d, 5]: the op of each slot, a random permutation per draw
    theta: torch.Tensor  # [d, 2, 3] inverse affine maps of the padded image
    k1d: torch.Tensor  # [d, kernel] blur kernels
    flip: torch.Tensor  # [d, 1, 1, 1] bool

    @classmethod
    def draw(cls, d: int, padded_h: int, padded_w: int, g: torch.Generator, device) -> _CottaDraws:
        return cls.from_uniform(_draw_uniform(d, g, device), padded_h, padded_w)

    @classmethod
    def from_uniform(cls, u: _UniformDraws, padded_h: int, padded_w: int, repeat: int = 1) -> _CottaDraws:
        """The parameters from their U(0, 1) draws, each row repeated ``repeat`` times (a shared
        draw per call, spread over the call's images). Element-wise arithmetic only, so one
        pass over many calls' draws gives each call's numbers (tests/blocks/test_views.py)."""
        def rows(t: torch.Tensor) -> torch.Tensor:
            # Each row ``repeat`` times in a row: an expanded view copied once, no count to read back.
            return t if repeat == 1 else t.unsqueeze(1).expand(-1, repeat, *t.shape[1:]).flatten(0, 1)
        d = u.factors.shape[1] * repeat
        view = (d, 1, 1, 1)
        factors = (
            rows(_scaled(u.factors[0], 0.6, 1.4)).view(view),  # brightness
            rows(_scaled(u.factors[1], 0.7, 1.3)).view(view),  # contrast
            rows(_scaled(u.factors[2], 0.5, 1.5)).view(view),  # saturation
            rows(_scaled(u.factors[3], -0.06, 0.06)).view(d, 1, 1),  # hue
            rows(_scaled(u.factors[4], 0.7, 1.3)).view(view),  # gamma
        )
        return cls(
            factors, rows(torch.argsort(u.order, dim=1)), rows(_affine_theta_from(u.affine, padded_h, padded_w)),
            rows(_blur_kernels_from(u.sigma)), rows(u.flip < 0.5).view(view),
        )

    def rows(self, start: int, stop: int) -> _CottaDraws:
        """The draws of images start:stop (all of them when they are shared)."""
        if self.order.shape[0] == 1:
            return self
        return _CottaDraws(
            tuple(f[start:stop] for f in self.factors), self.order[start:stop],
            self.theta[start:stop], self.k1d[start:stop], self.flip[start:stop],
        )


#: Images per chunk on the CPU: the padded intermediates of a chunk stay in the cache, and a
#: 16-view batch does not page in ~100 MB of fresh temporaries every call.
_CPU_CHUNK = 256


def _cotta_chunk(x: torch.Tensor, p: _CottaDraws, noise: torch.Tensor, out: torch.Tensor) -> None:
    """Steps 1–9 of stamp.md §3 for one chunk of images, written into ``out``."""
    n, c, h, w = x.shape
    x = _jitter(x.clamp(0.0, 1.0), p.factors, p.order)
    padded = F.pad(x, (w // 2, w // 2, h // 2, h // 2), mode="replicate")
    # Affine output only for the centre crop plus the blur's halo (module docstring).
    halo = _BLUR_KERNEL // 2
    grid = _affine_grid_window(
        p.theta, padded.shape[-2:], h // 2 - halo, w // 2 - halo, h + 2 * halo, w + 2 * halo
    )
    # The draws are float32 (one random stream for every precision); a no-op cast in float32.
    region = F.grid_sample(
        padded, grid.to(padded.dtype).expand(n, -1, -1, -1), mode="bilinear", padding_mode="zeros",
        align_corners=False,
    )
    x = _blur_valid(region, p.k1d.to(region.dtype).expand(n, -1))
    x = _flip_rows(x, p.flip)
    torch.clamp(x + 0.005 * noise, 0.0, 1.0, out=out)


def _cotta(
    x: torch.Tensor, g: torch.Generator, shared: bool, copies: int = 1, out: torch.Tensor | None = None
) -> torch.Tensor:
    """The CoTTA transform of stamp.md §3 steps 1–9, with one draw per image or ``shared``.

    Augments ``copies`` stacked copies of the batch ``x`` (row i is image i mod B) without
    materialising the stack, into ``out`` [copies·B, C, H, W] when given.
    """
    b, c, h, w = x.shape
    n = copies * b
    assert min(h, w) >= 2 * (_BLUR_KERNEL // 2), f"image {h}x{w} too small for the CoTTA transform"
    draws = _CottaDraws.draw(_draws(n, shared), h + 2 * (h // 2), w + 2 * (w // 2), g, x.device)
    noise = torch.randn((n, c, h, w), generator=g, device=x.device)
    out = torch.empty((n, c, h, w), dtype=x.dtype, device=x.device) if out is None else out
    chunk = n if _gpu_paths(x) else _CPU_CHUNK
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        if copies == 1:
            images = x[start:stop]
        else:
            images = x.index_select(0, torch.arange(start, stop, device=x.device) % b)
        _cotta_chunk(images, draws.rows(start, stop), noise[start:stop], out[start:stop])
    return out


def cotta_augment(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """CoTTA's test-time augmentation, one independent draw per image. x: [N,3,H,W]."""
    return _cotta(x, g, shared=False)


def cotta_augment_shared(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """CoTTA's test-time augmentation with one draw of parameters for the whole batch [N,3,H,W].

    The authors' CoTTA and RoTTA pass the whole batch tensor through torchvision transforms,
    which draw their parameters once per call (baselines.md §4 step 4, §7): every image gets the
    same colour factors and op order, affine, blur σ and flip; only the additive N(0, 0.005²)
    noise differs per pixel. Same op order and ranges as :func:`cotta_augment`.
    """
    return _cotta(x, g, shared=True)


def cotta_augment_batch(
    x: torch.Tensor,
    g: torch.Generator,
    normalization: tuple[torch.Tensor, torch.Tensor] | None = None,
    shared: bool = True,
) -> torch.Tensor:
    """The CoTTA augmentation of a [0,1] batch as CoTTA and RoTTA apply it, optionally in
    normalised space.

    With ``normalization = (mean, std)`` the batch is normalised, augmented (the transform
    clips to [0, 1] at both ends) and un-normalised, so the network behind the model's own
    normalisation sees exactly the clipped normalised tensor of the authors' ImageNet runs
    (baselines.md §4, §7).
    """
    aug = cotta_augment_shared if shared else cotta_augment
    if normalization is None:
        return aug(x, g)
    mean, std = normalization
    return aug((x - mean) / std, g) * std + mean


def cotta_augment_calls(
    x: torch.Tensor,
    g: torch.Generator,
    calls: int,
    normalization: tuple[torch.Tensor, torch.Tensor] | None = None,
    shared: bool = True,
) -> torch.Tensor:
    """``calls`` successive :func:`cotta_augment_batch` calls on the batch ``x``, stacked as
    [calls, B, C, H, W], with the very same random draws, in one pass over calls·B images.

    The parameters and noise of each call are drawn first, in the order the calls would draw
    them (none depends on the pixels), then all images are transformed at once; equal to the
    loop up to float rounding (tests/blocks/test_views.py).
    """
    b, c, h, w = x.shape
    assert calls >= 1 and min(h, w) >= 2 * (_BLUR_KERNEL // 2), f"image {h}x{w} too small for the CoTTA transform"
    if normalization is not None:
        mean, std = normalization
        return cotta_augment_calls((x - mean) / std, g, calls, None, shared) * std + mean
    uniform, noise = [], []
    for _ in range(calls):
        uniform.append(_draw_uniform(_draws(b, shared), g, x.device))
        noise.append(torch.randn((b, c, h, w), generator=g, device=x.device))
    draws = _CottaDraws.from_uniform(_UniformDraws.cat(uniform), h + 2 * (h // 2), w + 2 * (w // 2),
                                     repeat=b if shared else 1)
    out = torch.empty((calls * b, c, h, w), dtype=x.dtype, device=x.device)
    images = x.unsqueeze(0).expand(calls, *x.shape).reshape(calls * b, c, h, w)
    _cotta_chunk(images, draws, torch.cat(noise), out)
    return out.view(calls, b, c, h, w)


def crop_flip_augment(
    x: torch.Tensor, g: torch.Generator, padding: int = 4, fill: float | torch.Tensor = 0.0
) -> torch.Tensor:
    """RandomCrop(size, padding, constant fill) then RandomHorizontalFlip, per image."""
    n, c, h, w = x.shape
    fill_value = torch.as_tensor(fill, device=x.device, dtype=x.dtype).reshape(1, -1, 1, 1)
    padded = F.pad(x - fill_value, (padding, padding, padding, padding)) + fill_value
    off_y = torch.randint(0, 2 * padding + 1, (n,), generator=g, device=x.device)
    off_x = torch.randint(0, 2 * padding + 1, (n,), generator=g, device=x.device)
    rows = (off_y.view(-1, 1) + torch.arange(h, device=x.device)).view(n, h, 1)
    cols = (off_x.view(-1, 1) + torch.arange(w, device=x.device)).view(n, 1, w)
    batch = torch.arange(n, device=x.device).view(n, 1, 1)
    out = padded.permute(0, 2, 3, 1)[batch, rows, cols].permute(0, 3, 1, 2)
    return _hflip(out, g)


def make_views(
    x: torch.Tensor,
    num_views: int,
    kind: ViewKind,
    g: torch.Generator,
    fill: float | torch.Tensor = 0.0,
) -> torch.Tensor:
    """Stack [x, aug_1(x), …, aug_{K−1}(x)] as a [K, B, C, H, W] tensor (view 0 un-augmented).

    All K−1 augmented views are drawn in one vectorised call over K−1 × B images.
    """
    assert num_views >= 1, "num_views counts the clean view, so it is at least 1"
    if num_views == 1:
        return x.unsqueeze(0)
    if kind not in ("cotta", "crop_flip"):
        raise ValueError(f"unknown view kind {kind!r}; use 'cotta' or 'crop_flip'")
    views = torch.empty((num_views, *x.shape), dtype=x.dtype, device=x.device)
    views[0] = x
    augmented = views[1:].view(-1, *x.shape[1:])
    if kind == "cotta":
        _cotta(x, g, shared=False, copies=num_views - 1, out=augmented)
    else:
        repeated = x.unsqueeze(0).expand(num_views - 1, *x.shape).reshape(-1, *x.shape[1:])
        augmented.copy_(crop_flip_augment(repeated, g, fill=fill))
    return views
