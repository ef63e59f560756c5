"""The plain transcription of the CoTTA test-time views (stamp.md §3): the oracle of
``stamplib.blocks.views``.

``plain_cotta_augment`` is the straightforward implementation the package used before it was
made fast: every colour op on the whole batch in every slot, affine and blur on the whole
padded image, then the centre crop. tests/blocks/test_views.py asserts that the fast code gives
the same output from the same generator state; benchmarks/stamp_throughput.py times it as its
plain path (which is why it lives in the library: benchmarks import nothing from tests/).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _uniform(n, low, high, g, device):
    return torch.rand(n, generator=g, device=device) * (high - low) + low


def _gray(x):
    r, gch, b = x.unbind(dim=1)
    return (0.2989 * r + 0.587 * gch + 0.114 * b).unsqueeze(1)


def plain_rgb_to_hsv(x):
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


def plain_hsv_to_rgb(x):
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
    )
    idx = i.unsqueeze(1).unsqueeze(2).expand(-1, 3, 1, -1, -1)
    return table.gather(2, idx).squeeze(2)


def plain_hue_shift(img, hue):
    hsv = plain_rgb_to_hsv(img)
    h = torch.remainder(hsv[:, 0] + hue, 1.0)
    return plain_hsv_to_rgb(torch.stack((h, hsv[:, 1], hsv[:, 2]), dim=1))


def plain_colour_jitter(x, g, shared=False):
    n, dev = (1 if shared else x.shape[0]), x.device
    view = (n, 1, 1, 1)
    brightness = _uniform(n, 0.6, 1.4, g, dev).view(view)
    contrast = _uniform(n, 0.7, 1.3, g, dev).view(view)
    saturation = _uniform(n, 0.5, 1.5, g, dev).view(view)
    hue = _uniform(n, -0.06, 0.06, g, dev).view(n, 1, 1)
    gamma = _uniform(n, 0.7, 1.3, g, dev).view(view)
    order = torch.argsort(torch.rand(n, 5, generator=g, device=dev), dim=1)

    def apply(op, img):
        if op == 0:
            return (img * brightness).clamp(0.0, 1.0)
        if op == 1:
            mean = _gray(img).mean(dim=(1, 2, 3), keepdim=True)
            return (contrast * img + (1.0 - contrast) * mean).clamp(0.0, 1.0)
        if op == 2:
            return (saturation * img + (1.0 - saturation) * _gray(img)).clamp(0.0, 1.0)
        if op == 3:
            return plain_hue_shift(img, hue)
        return img.clamp(1e-8, 1.0).pow(gamma).clamp(0.0, 1.0)

    for slot in range(5):
        out = x
        for op in range(5):
            chosen = (order[:, slot] == op).view(view)
            if bool(chosen.any()):
                out = torch.where(chosen, apply(op, x), out)
        x = out
    return x


def plain_random_affine(x, g, shared=False):
    batch, _, h, w = x.shape
    n, dev = (1 if shared else batch), x.device
    angle = _uniform(n, -15.0, 15.0, g, dev) * math.pi / 180.0
    tx = torch.round(_uniform(n, -w / 16.0, w / 16.0, g, dev))
    ty = torch.round(_uniform(n, -h / 16.0, h / 16.0, g, dev))
    scale = _uniform(n, 0.9, 1.1, g, dev)
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
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


def plain_gaussian_blur(x, g, kernel=5, shared=False):
    n, c, h, w = x.shape
    sigma = _uniform(1 if shared else n, 0.001, 0.5, g, x.device).expand(n)
    half = (kernel - 1) / 2
    pos = torch.linspace(-half, half, kernel, device=x.device)
    k1d = torch.exp(-0.5 * (pos.view(1, -1) / sigma.view(-1, 1)) ** 2)
    k1d = (k1d / k1d.sum(dim=1, keepdim=True)).repeat_interleave(c, dim=0)
    pad = kernel // 2
    flat = F.pad(x.reshape(1, n * c, h, w), (pad, pad, pad, pad), mode="reflect")
    flat = F.conv2d(flat, k1d.view(n * c, 1, 1, kernel), groups=n * c)
    flat = F.conv2d(flat, k1d.view(n * c, 1, kernel, 1), groups=n * c)
    return flat.view(n, c, h, w)


def plain_cotta_augment(x: torch.Tensor, g: torch.Generator, shared: bool = False) -> torch.Tensor:
    """stamp.md §3 steps 1–9 on the whole padded image, each step as written."""
    n, c, h, w = x.shape
    x = plain_colour_jitter(x.clamp(0.0, 1.0), g, shared)
    x = F.pad(x, (w // 2, w // 2, h // 2, h // 2), mode="replicate")
    x = plain_random_affine(x, g, shared)
    x = plain_gaussian_blur(x, g, shared=shared)
    x = x[:, :, h // 2 : h // 2 + h, w // 2 : w // 2 + w]
    flip = torch.rand(1 if shared else n, generator=g, device=x.device) < 0.5
    x = torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)
    x = x + 0.005 * torch.randn(x.shape, generator=g, device=x.device)
    return x.clamp(0.0, 1.0)


def plain_make_views(x: torch.Tensor, num_views: int, g: torch.Generator) -> torch.Tensor:
    """[K, B, C, H, W]: the clean batch, then K−1 CoTTA views drawn in one call."""
    repeated = x.unsqueeze(0).expand(num_views - 1, *x.shape).reshape(-1, *x.shape[1:])
    aug = plain_cotta_augment(repeated, g)
    return torch.cat((x.unsqueeze(0), aug.view(num_views - 1, *x.shape)), dim=0)
