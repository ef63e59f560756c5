"""The batched view augmentations (stamp.md §3) against a plain transcription (issue 9).

``plain_cotta_augment`` below is the straightforward implementation the package used before
it was made fast: every colour op on the whole batch in every slot, affine and blur on the
whole padded image, then the centre crop. The fast code must give the same output from the
same generator state, per image and shared, and leave the generator in the same state.
(benchmarks/stamp_throughput.py times this transcription as its plain path.)
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from stamplib.blocks import views

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


# -- the plain transcription (the oracle) ---------------------------------------------------------
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


# -- helpers ------------------------------------------------------------------------------------------
def _images(n: int, h: int, w: int, seed: int = 0, device: str = "cpu") -> torch.Tensor:
    """Random images with the awkward cases of the colour ops: grey pixels (max = min),
    saturated 0/1 values and ties between two channels."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 3, h, w, generator=g)
    x[:, :, 0] = x[:, :1, 0]  # grey row
    x[:, 1, 1] = x[:, 0, 1]  # r = g ties
    x[:, :, 2, : w // 2] = 1.0
    x[:, :, 3, : w // 2] = 0.0
    return x.to(device)


def _generators(seed: int, device: str) -> tuple[torch.Generator, torch.Generator]:
    return (torch.Generator(device=device).manual_seed(seed), torch.Generator(device=device).manual_seed(seed))


# -- fast == plain ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shared", [False, True], ids=["per_image", "shared"])
@pytest.mark.parametrize(("n", "h", "w"), [(40, 32, 32), (300, 32, 32), (40, 8, 8), (40, 17, 26)])
def test_cotta_augment_equals_the_plain_transcription(device, shared, n, h, w):
    """300 images: more than one CPU chunk (a short last one included)."""
    x = _images(n, h, w, device=device)
    fast = views.cotta_augment_shared if shared else views.cotta_augment
    # On CUDA, cuDNN and cuBLAS may pick other kernels for the smaller problem (TF32 included),
    # so only rounding-level agreement is asked there; a wrong draw would differ by ~0.1.
    atol = 1e-6 if device == "cpu" else 1e-4
    for seed in range(3):
        g_fast, g_plain = _generators(seed, device)
        expected = plain_cotta_augment(x, g_plain, shared)
        torch.testing.assert_close(fast(x, g_fast), expected, rtol=0, atol=atol)
        # Same number of draws: the generators end in the same state.
        assert torch.equal(g_fast.get_state(), g_plain.get_state())


@pytest.mark.parametrize("shared", [False, True], ids=["per_image", "shared"])
def test_colour_jitter_applies_each_op_only_where_drawn_with_the_same_result(shared):
    x = _images(64, 12, 12, seed=1)
    g_fast, g_plain = _generators(7, "cpu")
    draws = views._CottaDraws.draw(1 if shared else 64, 24, 24, g_fast, "cpu")  # jitter draws first
    fast = views._jitter(x, draws.factors, draws.order)
    torch.testing.assert_close(fast, plain_colour_jitter(x, g_plain, shared), rtol=0, atol=1e-6)


def test_hue_shift_matches_torchvision_arithmetic_including_sector_edges():
    x = _images(8, 16, 16, seed=2)
    # hue offsets that push h to exactly 0, next to 1 and across the wrap
    hue = torch.tensor([0.0, 0.06, -0.06, 1e-8, -1e-8, 0.5 - 1e-7, 1.0 / 6.0, 5.0 / 6.0]).view(8, 1, 1)
    torch.testing.assert_close(views._hue_shift(x, hue), plain_hue_shift(x, hue), rtol=0, atol=1e-6)


def test_valid_blur_of_the_centre_equals_the_reflect_padded_blur_then_crop():
    """The shortcut's claim: with a halo of kernel//2 pixels the reflect padding never reaches
    the crop (module docstring of stamplib.blocks.views)."""
    n, c, size, kernel = 6, 3, 40, 5
    x = torch.rand(n, c, size, size, generator=torch.Generator().manual_seed(3))
    g_fast, g_plain = _generators(4, "cpu")
    full = plain_gaussian_blur(x, g_plain, kernel)
    halo, top, crop = kernel // 2, 10, 20
    region = x[:, :, top - halo : top + crop + halo, top - halo : top + crop + halo]
    valid = views._blur_valid(region, views._blur_kernels(n, g_fast, "cpu", kernel))
    torch.testing.assert_close(valid, full[:, :, top : top + crop, top : top + crop], rtol=0, atol=1e-6)


def test_affine_grid_window_is_the_slice_of_the_full_grid():
    theta = torch.randn(5, 2, 3, generator=torch.Generator().manual_seed(5))
    full = F.affine_grid(theta, [5, 3, 64, 48], align_corners=False)
    window = views._affine_grid_window(theta, (64, 48), 14, 10, 36, 28)
    # Each grid value is a 3-term dot product (x, y, 1)·θ_row. The two matrix products may be
    # run by different kernels (problem sizes differ), so rounding may differ: each is within
    # γ₃·Σ|a_k θ_k| of the exact value (γ₃ ≈ 3u, u = float32 unit roundoff), hence the bound.
    base = F.affine_grid(torch.eye(2, 3).expand(5, 2, 3), [5, 3, 64, 48], align_corners=False)
    coords = torch.cat([base, torch.ones_like(base[..., :1])], dim=-1)[:, 14:50, 10:38]  # (x, y, 1)
    magnitude = torch.einsum("nhwk,nck->nhwc", coords.abs(), theta.abs())
    bound = 2 * 3.01 * (torch.finfo(torch.float32).eps / 2) * magnitude
    assert ((window - full[:, 14:50, 10:38]).abs() <= bound).all()
    assert not ((window - full[:, 15:51, 10:38]).abs() <= bound).all()  # one row off fails


# -- make_views -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["cotta", "crop_flip"])
def test_make_views_shape_clean_view_and_range(kind):
    x = _images(8, 32, 32, seed=6)
    out = views.make_views(x, 16, kind, torch.Generator().manual_seed(0))
    assert out.shape == (16, 8, 3, 32, 32)
    assert torch.equal(out[0], x)
    assert out.min() >= 0 and out.max() <= 1
    assert views.make_views(x, 1, kind, torch.Generator()).shape == (1, 8, 3, 32, 32)


def test_make_views_cotta_equals_the_plain_views():
    """15 × 40 augmented images: several CPU chunks, none aligned with the batch."""
    x = _images(40, 32, 32, seed=8)
    g_fast, g_plain = _generators(9, "cpu")
    fast = views.make_views(x, 16, "cotta", g_fast)
    torch.testing.assert_close(fast, plain_make_views(x, 16, g_plain), rtol=0, atol=1e-6)
