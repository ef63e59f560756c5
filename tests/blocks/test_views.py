"""The batched view augmentations (stamp.md §3) against their plain transcription
(tests/oracles/views.py): the fast code must give the same output from the same generator
state, per image and shared, and leave the generator in the same state."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from stamplib.blocks import views
from tests.oracles.views import (
    plain_colour_jitter,
    plain_cotta_augment,
    plain_gaussian_blur,
    plain_hue_shift,
    plain_make_views,
)
from tests.support import image_batch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


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
    valid = views._blur_valid(region, views._blur_kernels_from(torch.rand(n, generator=g_fast), kernel))
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


def test_shared_augmentation_draws_one_parameter_set_per_call() -> None:
    img = image_batch(1, seed=5, size=16)
    x = img.expand(12, -1, -1, -1).contiguous()
    shared = views.cotta_augment_shared(x, torch.Generator().manual_seed(0))
    per_image = views.cotta_augment(x, torch.Generator().manual_seed(0))
    # Shared parameters: identical inputs differ only by the per-pixel N(0, 0.005²) noise.
    assert (shared - shared[:1]).abs().max() < 0.06
    assert (per_image[1:] - per_image[:1]).abs().amax(dim=(1, 2, 3)).min() > 0.06
    assert (shared - x).abs().mean() > 0.01, "the shared draw must still augment"
    assert shared.min() >= 0 and shared.max() <= 1
    # Reproducible from the generator alone.
    assert torch.equal(shared, views.cotta_augment_shared(x, torch.Generator().manual_seed(0)))



# -- several calls in one pass (CoTTA's teacher views, issue 42) ------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("normalised", [False, True])
def test_augment_calls_equals_the_calls_one_after_another(device, shared, normalised):
    x = _images(5, 16, 16, seed=3, device=device)
    normalization = (torch.tensor([0.4, 0.5, 0.6], device=device).view(1, 3, 1, 1),
                     torch.tensor([0.2, 0.25, 0.3], device=device).view(1, 3, 1, 1)) if normalised else None
    one_pass, loop = _generators(11, device)
    stacked = views.cotta_augment_calls(x, one_pass, 4, normalization, shared)
    expected = torch.stack([views.cotta_augment_batch(x, loop, normalization, shared) for _ in range(4)])
    assert stacked.shape == (4, *x.shape)
    torch.testing.assert_close(stacked, expected, rtol=0, atol=1e-5)
    assert torch.equal(one_pass.get_state(),
                       loop.get_state()), "the same draws, so the generator ends in the same state"


def test_the_synchronisation_free_jitter_and_flip_keep_the_index_paths_numbers():
    """The GPU variants (no nonzero) on a CPU, against the index paths the CPU runs."""
    g = torch.Generator().manual_seed(5)
    x = _images(12, 16, 16, seed=4)
    draws = views._CottaDraws.draw(12, 32, 32, g, "cpu")
    torch.testing.assert_close(
        views._jitter_masked(x, draws.factors, draws.order),
        views._jitter(x, draws.factors, draws.order),
        rtol=0,
        atol=0,
    )
    flip = draws.flip
    on_gpu_rule = torch.where(flip.view(-1, 1, 1, 1), x.flip(-1), x)
    assert torch.equal(views._flip_rows(x.clone(), flip), on_gpu_rule) and flip.any() and not flip.all()


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "per_image"])
def test_many_calls_parameters_from_one_pass_are_each_calls_own(shared):
    """CoTTA's teacher views draw each call's U(0, 1) values in the call's order, then turn all
    of them into parameters in one pass (issue 51): bit for bit the parameters that each call
    would have drawn on its own, one row per image of the stacked calls."""
    calls, images = 6, 5
    d = 1 if shared else images
    one_pass, per_call = _generators(13, "cpu")
    uniform = [views._draw_uniform(d, one_pass, "cpu") for _ in range(calls)]
    batched = views._CottaDraws.from_uniform(views._UniformDraws.cat(uniform), 32, 32, repeat=images if shared else 1)
    own = [views._CottaDraws.draw(d, 32, 32, per_call, "cpu") for _ in range(calls)]

    def per_image(t: torch.Tensor) -> torch.Tensor:  # a call's shared row spread over its images
        return t.expand(images, *t.shape[1:])

    for i in range(5):
        assert torch.equal(batched.factors[i], torch.cat([per_image(o.factors[i]) for o in own]))
    for name in ("order", "theta", "k1d", "flip"):
        assert torch.equal(getattr(batched, name), torch.cat([per_image(getattr(o, name)) for o in own])), name
    assert torch.equal(one_pass.get_state(), per_call.get_state())
