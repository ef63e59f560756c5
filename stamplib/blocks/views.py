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
* :func:`crop_flip_augment` — random crop with zero (``fill``) padding of 4 px, then h-flip
  (CIFAR100-C, the class-split sets, ImageNet-C).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F

ViewKind = Literal["cotta", "crop_flip"]


def _uniform(n: int, low: float, high: float, g: torch.Generator, device) -> torch.Tensor:
    return torch.rand(n, generator=g, device=device) * (high - low) + low


def _draws(n: int, shared: bool) -> int:
    """How many parameter sets to draw for a batch of ``n``: one per image, or one in all."""
    return 1 if shared else n


def _gray(x: torch.Tensor) -> torch.Tensor:
    r, gch, b = x.unbind(dim=1)
    return (0.2989 * r + 0.587 * gch + 0.114 * b).unsqueeze(1)


def _rgb_to_hsv(x: torch.Tensor) -> torch.Tensor:
    r, g, b = x.unbind(dim=1)
    maxc, _ = x.max(dim=1)
    minc, _ = x.min(dim=1)
    eqc = maxc == minc
    cr = maxc - minc
    ones = torch.ones_like(maxc)
    s = cr / torch.where(eqc, ones, maxc)
    cr_div = torch.where(eqc, ones, cr)
    rc, gc, bc = (maxc - r) / cr_div, (maxc - g) / cr_div, (maxc - b) / cr_div
    hr = (maxc == r) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
    h = torch.fmod((hr + hg + hb) / 6.0 + 1.0, 1.0)
    return torch.stack((h, s, maxc), dim=1)


def _hsv_to_rgb(x: torch.Tensor) -> torch.Tensor:
    h, s, v = x.unbind(dim=1)
    i = torch.floor(h * 6.0)
    f = h * 6.0 - i
    i = i.to(torch.int64) % 6
    p = (v * (1.0 - s)).clamp(0.0, 1.0)
    q = (v * (1.0 - s * f)).clamp(0.0, 1.0)
    t = (v * (1.0 - s * (1.0 - f))).clamp(0.0, 1.0)
    table = torch.stack(
        [
            torch.stack((v, q, p, p, t, v), dim=1),
            torch.stack((t, v, v, q, p, p), dim=1),
            torch.stack((p, p, t, v, v, q), dim=1),
        ],
        dim=1,
    )  # [N, 3 (rgb), 6 (sector), H, W]
    idx = i.unsqueeze(1).unsqueeze(2).expand(-1, 3, 1, -1, -1)
    return table.gather(2, idx).squeeze(2)


def _colour_jitter(x: torch.Tensor, g: torch.Generator, shared: bool = False) -> torch.Tensor:
    """CoTTA's ColorJitterPro with per-image (or, ``shared``, per-batch) factors and op order."""
    n, dev = _draws(x.shape[0], shared), x.device
    view = (n, 1, 1, 1)
    brightness = _uniform(n, 0.6, 1.4, g, dev).view(view)
    contrast = _uniform(n, 0.7, 1.3, g, dev).view(view)
    saturation = _uniform(n, 0.5, 1.5, g, dev).view(view)
    hue = _uniform(n, -0.06, 0.06, g, dev).view(n, 1, 1)
    gamma = _uniform(n, 0.7, 1.3, g, dev).view(view)
    order = torch.argsort(torch.rand(n, 5, generator=g, device=dev), dim=1)  # a randperm per draw

    def apply(op: int, img: torch.Tensor) -> torch.Tensor:
        if op == 0:
            return (img * brightness).clamp(0.0, 1.0)
        if op == 1:
            mean = _gray(img).mean(dim=(1, 2, 3), keepdim=True)
            return (contrast * img + (1.0 - contrast) * mean).clamp(0.0, 1.0)
        if op == 2:
            return (saturation * img + (1.0 - saturation) * _gray(img)).clamp(0.0, 1.0)
        if op == 3:
            hsv = _rgb_to_hsv(img)
            h = torch.remainder(hsv[:, 0] + hue, 1.0)
            return _hsv_to_rgb(torch.stack((h, hsv[:, 1], hsv[:, 2]), dim=1))
        return img.clamp(1e-8, 1.0).pow(gamma).clamp(0.0, 1.0)

    for slot in range(5):
        out = x
        for op in range(5):
            chosen = (order[:, slot] == op).view(view)
            if bool(chosen.any()):
                out = torch.where(chosen, apply(op, x), out)
        x = out
    return x


def _random_affine(x: torch.Tensor, g: torch.Generator, shared: bool = False) -> torch.Tensor:
    """Rotation ±15°, translation ≤ 1/16 of the size (whole pixels), scale 0.9–1.1, bilinear, fill 0."""
    batch, _, h, w = x.shape
    n, dev = _draws(batch, shared), x.device
    angle = _uniform(n, -15.0, 15.0, g, dev) * math.pi / 180.0
    max_dx, max_dy = w / 16.0, h / 16.0
    tx = torch.round(_uniform(n, -max_dx, max_dx, g, dev))
    ty = torch.round(_uniform(n, -max_dy, max_dy, g, dev))
    scale = _uniform(n, 0.9, 1.1, g, dev)
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    # Inverse map in normalised coordinates: input = R(-θ)/s · (output − t).
    t_x, t_y = tx * 2.0 / w, ty * 2.0 / h
    theta = torch.stack(
        (
            torch.stack((cos, sin, -(cos * t_x + sin * t_y)), dim=1),
            torch.stack((-sin, cos, -(-sin * t_x + cos * t_y)), dim=1),
        ),
        dim=1,
    )
    grid = F.affine_grid(theta.expand(batch, 2, 3), list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def _gaussian_blur(x: torch.Tensor, g: torch.Generator, kernel: int = 5, shared: bool = False) -> torch.Tensor:
    """Per-image (or shared) σ ~ U(0.001, 0.5), separable kernel, reflect padding (torchvision's rule)."""
    n, c, h, w = x.shape
    sigma = _uniform(_draws(n, shared), 0.001, 0.5, g, x.device).expand(n)
    half = (kernel - 1) / 2
    pos = torch.linspace(-half, half, kernel, device=x.device)
    k1d = torch.exp(-0.5 * (pos.view(1, -1) / sigma.view(-1, 1)) ** 2)
    k1d = (k1d / k1d.sum(dim=1, keepdim=True)).repeat_interleave(c, dim=0)  # [n·c, k]
    pad = kernel // 2
    flat = F.pad(x.reshape(1, n * c, h, w), (pad, pad, pad, pad), mode="reflect")
    flat = F.conv2d(flat, k1d.view(n * c, 1, 1, kernel), groups=n * c)
    flat = F.conv2d(flat, k1d.view(n * c, 1, kernel, 1), groups=n * c)
    return flat.view(n, c, h, w)


def _hflip(x: torch.Tensor, g: torch.Generator, p: float = 0.5, shared: bool = False) -> torch.Tensor:
    flip = (torch.rand(_draws(x.shape[0], shared), generator=g, device=x.device) < p).view(-1, 1, 1, 1)
    return torch.where(flip, x.flip(-1), x)


def cotta_augment(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """CoTTA's test-time augmentation, one independent draw per image. x: [N,3,H,W]."""
    n, c, h, w = x.shape
    x = _colour_jitter(x.clamp(0.0, 1.0), g)
    x = F.pad(x, (w // 2, w // 2, h // 2, h // 2), mode="replicate")
    x = _random_affine(x, g)
    x = _gaussian_blur(x, g)
    x = x[:, :, h // 2 : h // 2 + h, w // 2 : w // 2 + w]
    x = _hflip(x, g)
    x = x + 0.005 * torch.randn(x.shape, generator=g, device=x.device)
    return x.clamp(0.0, 1.0)


def cotta_augment_shared(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """CoTTA's test-time augmentation with one draw of parameters for the whole batch [N,3,H,W].

    The authors' CoTTA and RoTTA pass the whole batch tensor through torchvision transforms,
    which draw their parameters once per call (baselines.md §4 step 4, §7): every image gets the
    same colour factors and op order, affine, blur σ and flip; only the additive N(0, 0.005²)
    noise differs per pixel. Same op order and ranges as :func:`cotta_augment`.
    """
    n, c, h, w = x.shape
    x = _colour_jitter(x.clamp(0.0, 1.0), g, shared=True)
    x = F.pad(x, (w // 2, w // 2, h // 2, h // 2), mode="replicate")
    x = _random_affine(x, g, shared=True)
    x = _gaussian_blur(x, g, shared=True)
    x = x[:, :, h // 2 : h // 2 + h, w // 2 : w // 2 + w]
    x = _hflip(x, g, shared=True)
    x = x + 0.005 * torch.randn(x.shape, generator=g, device=x.device)
    return x.clamp(0.0, 1.0)


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
    repeated = x.unsqueeze(0).expand(num_views - 1, *x.shape).reshape(-1, *x.shape[1:])
    if kind == "cotta":
        aug = cotta_augment(repeated, g)
    elif kind == "crop_flip":
        aug = crop_flip_augment(repeated, g, fill=fill)
    else:
        raise ValueError(f"unknown view kind {kind!r}; use 'cotta' or 'crop_flip'")
    return torch.cat((x.unsqueeze(0), aug.view(num_views - 1, *x.shape)), dim=0)
