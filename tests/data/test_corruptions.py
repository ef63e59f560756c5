"""Tests for stamplib.data.corruptions (protocol.md §7).

Small batches only (8 images of 32×32, a couple at 64/224) so the file runs in seconds.
The property tests are chosen so that a wrong table row or a wrong formula fails them.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from stamplib.data import corruptions as C
from stamplib.data.corruptions import CORRUPTIONS, corrupt, parameters
from tests.oracles import corruptions as oracle

HAS_FROST = importlib.util.find_spec("imagecorruptions") is not None
RANDOM = {
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "glass_blur",
    "motion_blur",
    "snow",
    "frost",
    "fog",
    "elastic_transform",
}


def _skip_frost(name: str) -> None:
    if name == "frost" and not HAS_FROST:
        pytest.skip("imagecorruptions (frost textures) not installed")


@pytest.fixture(scope="module")
def batch32() -> np.ndarray:
    """8 smooth-ish random 32×32 images (noise blurred a little, so blurs change them)."""
    rng = np.random.default_rng(123)
    base = rng.integers(0, 256, (8, 8, 8, 3)).astype(np.float64)
    up = np.kron(base, np.ones((1, 4, 4, 1)))
    up += rng.normal(0, 20, up.shape)
    return np.clip(up, 0, 255).astype(np.uint8)


def test_names_and_order() -> None:
    assert CORRUPTIONS == (
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


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_contract(name: str, batch32: np.ndarray) -> None:
    """Determinism, dtype/shape, numpy == torch, batch-size/chunk independence, seed effect."""
    _skip_frost(name)
    x = batch32
    y = corrupt(x, name, 5)
    assert isinstance(y, np.ndarray) and y.dtype == np.uint8 and y.shape == x.shape
    assert np.array_equal(y, corrupt(x.copy(), name, 5))
    assert not np.array_equal(y, x)
    # chunking: image i of the dataset always uses index i
    assert np.array_equal(y[3:5], corrupt(x[3:5], name, 5, index_offset=3))
    assert np.array_equal(y[7:], corrupt(x[7:], name, 5, index_offset=7))
    # torch in -> torch out, same bytes
    yt = corrupt(torch.from_numpy(x), name, 5)
    assert isinstance(yt, torch.Tensor) and yt.dtype == torch.uint8
    assert np.array_equal(yt.numpy(), y)
    y_seed = corrupt(x, name, 5, seed=1)
    if name in RANDOM:
        assert not np.array_equal(y, y_seed)
        # images with identical content still get different randomness (index matters)
        same = np.repeat(x[:1], 2, axis=0)
        ys = corrupt(same, name, 5)
        assert not np.array_equal(ys[0], ys[1])
    else:
        assert np.array_equal(y, y_seed)


@pytest.mark.parametrize("severity", [1, 5])
@pytest.mark.parametrize("name", CORRUPTIONS)
def test_matches_the_per_image_oracle(name: str, severity: int, batch32: np.ndarray) -> None:
    """The batched suite gives the bytes of the plain per-image transcription of the reference
    code (tests/oracles/corruptions.py) from the same per-image generators, including the
    dataset index of each image."""
    _skip_frost(name)
    x = batch32[:3]
    got = corrupt(x, name, severity, seed=5, index_offset=10)
    assert np.array_equal(got, oracle.reference(x, name, severity, seed=5, index_offset=10))


@pytest.mark.parametrize("size", [64, 224])
def test_other_sizes(size: int) -> None:
    """Every corruption runs at 64 and 224 (1–2 images) and stays chunk independent."""
    rng = np.random.default_rng(size)
    n = 2 if size == 64 else 1
    x = rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8)
    for name in CORRUPTIONS:
        if name == "frost" and not HAS_FROST:
            continue
        sev = 5 if size == 64 else 2
        y = corrupt(x, name, sev, seed=3)
        assert y.shape == x.shape and y.dtype == np.uint8, name
        assert np.array_equal(
            y[n - 1 :], corrupt(x[n - 1 :], name, sev, seed=3, index_offset=n - 1)
        )


def test_errors() -> None:
    x = np.zeros((2, 32, 32, 3), np.uint8)
    with pytest.raises(ValueError, match="gaussian_noise.*jpeg_compression"):
        corrupt(x, "gaussian_blur", 1)
    for sev in (0, 6):
        with pytest.raises(ValueError, match="from 1 to 5"):
            corrupt(x, "fog", sev)
    with pytest.raises(ValueError, match="32, 64, 224"):
        corrupt(np.zeros((1, 48, 48, 3), np.uint8), "fog", 1)
    with pytest.raises(ValueError, match="uint8"):
        corrupt(x.astype(np.float32), "fog", 1)
    with pytest.raises(ValueError, match="shape"):
        corrupt(np.zeros((1, 32, 30, 3), np.uint8), "fog", 1)
    with pytest.raises(ValueError, match="32, 64, 224"):
        parameters("fog", 1, 100)
    with pytest.raises(ValueError, match="index_offset"):
        corrupt(x, "fog", 1, index_offset=-1)
    assert corrupt(x[:0], "fog", 1).shape == (0, 32, 32, 3)


def test_parameter_rows() -> None:
    assert parameters("gaussian_noise", 4, 32) == 0.09
    assert parameters("gaussian_noise", 4, 64) == 0.15
    assert parameters("gaussian_noise", 4, 224) == 0.26
    assert parameters("elastic_transform", 5, 32) == pytest.approx((3.2, 0.96, 0.96))
    assert parameters("elastic_transform", 5, 224) == pytest.approx((29.28, 2.44, 4.88))
    assert parameters("snow", 5, 224) == (0.55, 0.3, 2.5, 0.85, 12, 12, 0.55)
    assert parameters("jpeg_compression", 1, 64) == 65
    assert parameters("jpeg_compression", 3, 32) == 58
    assert [int(32 * parameters("pixelate", s, 32)) for s in range(1, 6)] == [30, 28, 27, 24, 20]


def test_zoom_factor_counts() -> None:
    counts = {
        32: [7, 12, 16, 21, 26],
        64: [7, 12, 16, 21, 26],
        224: [12, 16, 11, 13, 11],
    }
    for size, expected in counts.items():
        got = [len(parameters("zoom_blur", s, size)) for s in range(1, 6)]
        assert got == expected, size
        assert all(parameters("zoom_blur", s, size)[0] == 1.0 for s in range(1, 6))


def _grey(value: int, n: int = 8, size: int = 32) -> np.ndarray:
    return np.full((n, size, size, 3), value, np.uint8)


def test_gaussian_noise_std() -> None:
    x = _grey(128)
    stds = []
    for sev in range(1, 6):
        sigma = parameters("gaussian_noise", sev, 32)
        resid = corrupt(x, "gaussian_noise", sev).astype(np.float64) - 128
        assert resid.std() == pytest.approx(sigma * 255, rel=0.04)
        assert resid.mean() == pytest.approx(-0.5, abs=0.5)  # truncation bias
        stds.append(resid.std())
    assert stds == sorted(stds)


def test_shot_noise_variance() -> None:
    x = _grey(128)
    for sev in (1, 5):
        c = parameters("shot_noise", sev, 32)
        y = corrupt(x, "shot_noise", sev).astype(np.float64) / 255
        assert y.var() == pytest.approx((128 / 255) / c, rel=0.08)


def test_impulse_fraction() -> None:
    x = _grey(128)
    for sev in (1, 5):
        amount = parameters("impulse_noise", sev, 32)
        y = corrupt(x, "impulse_noise", sev)
        flipped = y != 128
        assert flipped.mean() == pytest.approx(amount, rel=0.12)
        assert set(np.unique(y[flipped])) <= {0, 255}
        assert (y == 255).sum() / flipped.sum() == pytest.approx(0.5, abs=0.08)


def test_defocus_kernel_normalised() -> None:
    for size in (32, 64, 224):
        for sev in range(1, 6):
            r, a = parameters("defocus_blur", sev, size)
            k = C._disk(r, a)
            side = 17 if r <= 8 else 2 * r + 1
            assert k.shape == (side, side)
            if r < 8:
                assert k.sum() == pytest.approx(1.0, abs=1e-5)
            else:  # disk touches the grid border; cv2's reflect-101 blur adds mass (as reference)
                assert 1.0 < k.sum() < 1.02
            assert np.allclose(k, k.T) and np.allclose(k, k[::-1])


def test_brightness_shifts_value() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 150, (4, 32, 32, 3), dtype=np.uint8)  # V <= 0.59: no clipping
    for sev in (1, 5):
        c = parameters("brightness", sev, 32)
        y = corrupt(x, "brightness", sev)
        dv = (y.max(-1).astype(np.float64) - x.max(-1)) / 255
        assert dv.mean() == pytest.approx(c, abs=1 / 255)
        assert np.abs(dv - c).max() <= 1.5 / 255


def test_hsv_roundtrip_and_priority() -> None:
    rng = np.random.default_rng(1)
    rgb = rng.random((50, 3))
    rgb[:5] = rgb[:5, :1]  # grey: hue and saturation 0
    hsv = C.rgb_to_hsv(rgb)
    assert np.allclose(C.hsv_to_rgb(hsv), rgb)
    assert np.all(hsv[:5, :2] == 0)
    assert np.allclose(C.rgb_to_hsv(np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]))[:, 0], [0, 2 / 3])


def test_contrast_scales_deviation(batch32: np.ndarray) -> None:
    for sev in (1, 5):
        c = parameters("contrast", sev, 32)
        xf = batch32 / 255.0
        mean = xf.mean(axis=(1, 2), keepdims=True)
        expected = ((xf - mean) * c + mean) * 255
        y = corrupt(batch32, "contrast", sev).astype(np.float64)
        assert np.all((expected - y >= -1e-6) & (expected - y < 1 + 1e-6))


def test_motion_blur_kernel_width_and_direction() -> None:
    # radius 3 -> 2*3+1 = 7 one-sided taps; huge sigma -> flat weights 1/7 each.
    x = np.zeros((1, 32, 32, 1), np.uint8)
    x[0, 16, 16, 0] = 252
    y = C._motion_blur_uint8(x, 3, 1e4, np.array([0.0]))[0, :, :, 0]
    assert np.array_equal(np.nonzero(y[16])[0], np.arange(10, 17))  # smear to the left
    assert np.all(y[16, 10:17] == 36) and y.sum() == 7 * 36
    y90 = C._motion_blur_uint8(x, 3, 1e4, np.array([90.0]))[0, :, :, 0]
    assert np.array_equal(np.nonzero(y90[:, 16])[0], np.arange(10, 17))
    # constant images are preserved (normalised kernel, edge virtual pixels)
    flat = np.full((2, 32, 32, 3), 77, np.uint8)
    assert np.all(corrupt(flat, "motion_blur", 5) == 77)


def test_zoom_blur_constant_and_blurs() -> None:
    flat = _grey(200, n=2)
    assert np.abs(corrupt(flat, "zoom_blur", 5).astype(int) - 200).max() <= 1
    x = np.zeros((1, 32, 32, 3), np.uint8)
    x[0, :, 24] = 255  # a vertical line right of centre is smeared outwards (zoom > 1)
    y1 = corrupt(x, "zoom_blur", 1)  # factors up to 1.06: line moves < 1 px
    y5 = corrupt(x, "zoom_blur", 5)  # factors up to 1.25: line reaches column 28
    assert y1[0, 16, 27:30].max() == 0
    assert y5[0, 16, 27:30].max() > 0
    assert y5[0, 16, :23].max() == 0


def test_fog_range_white_image() -> None:
    for sev in (1, 5):
        c, _ = parameters("fog", sev, 32)
        y = corrupt(_grey(255, n=2), "fog", sev)
        # x = 1 + c*plasma, m = 1 -> out = (1 + c*plasma) / (1 + c); plasma spans [0, 1]
        assert abs(int(y.min()) - int(255 / (1 + c))) <= 1
        assert y.max() == 255


def test_plasma_normalised() -> None:
    rngs = [np.random.default_rng(i) for i in range(3)]
    p = C._plasma_fractal(32, 2.0, rngs)
    assert p.shape == (3, 32, 32)
    assert np.allclose(p.min(axis=(1, 2)), 0) and np.allclose(p.max(axis=(1, 2)), 1)


def test_snow_floor_on_black() -> None:
    for sev in (1, 5):
        b = parameters("snow", sev, 32)[6]
        y = corrupt(_grey(0, n=2), "snow", sev)
        # black image -> (1-b)*max(0, 0*1.5+0.5) plus non-negative snow
        assert int(y.min()) == int((1 - b) * 0.5 * 255)
        assert y.max() > y.min()


def test_elastic_severity1_is_affine_only() -> None:
    assert parameters("elastic_transform", 1, 32)[:2] == (0, 0)
    flat = _grey(90, n=2)
    assert np.abs(corrupt(flat, "elastic_transform", 1).astype(int) - 90).max() <= 1


def test_warp_affine_identity_and_shift() -> None:
    img = np.random.default_rng(0).random((32, 32, 3)).astype(np.float32)
    ident = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    assert np.allclose(C._warp_affine_reflect101(img, ident), img)
    shift = np.array([[1.0, 0, 2.0], [0, 1.0, 0]])  # dst(x) = src(x - 2), reflect-101 at left
    out = C._warp_affine_reflect101(img, shift)
    assert np.allclose(out[:, 2:], img[:, :-2])
    assert np.allclose(out[:, 0], img[:, 2]) and np.allclose(out[:, 1], img[:, 1])


def test_cv2_resize_emulation_sizes() -> None:
    img = np.arange(600 * 900 * 3, dtype=np.int64).reshape(600, 900, 3).astype(np.uint8)
    assert C._cv2_resize_linear(img, 0.2).shape == (120, 180, 3)
    # factor 1/5: source centre 5d + 2 is an integer -> pure point sampling, no anti-aliasing
    assert np.array_equal(C._cv2_resize_linear(img, 0.2), img[2::5, 2::5])


@pytest.mark.skipif(not HAS_FROST, reason="imagecorruptions (frost textures) not installed")
def test_frost_bounds() -> None:
    sizes = [t.shape[:2] for t in C._frost_textures(32)]
    assert sizes == [(120, 180), (63, 112), (63, 112), (70, 105), (99, 132)]
    for sev in (1, 5):
        a, f = parameters("frost", sev, 32)
        y0 = corrupt(_grey(0, n=4), "frost", sev)
        assert y0.max() <= f * 255 and y0.max() > 0.5 * f * 255
        y1 = corrupt(_grey(200, n=4), "frost", sev)
        assert y1.min() >= int(a * 200)


def test_frost_missing_package_message(monkeypatch: pytest.MonkeyPatch) -> None:
    C._frost_textures.cache_clear()
    monkeypatch.setattr(C.importlib.util, "find_spec", lambda name: None)
    try:
        with pytest.raises(RuntimeError, match="imagecorruptions"):
            corrupt(_grey(0, n=1), "frost", 1)
        assert corrupt(_grey(0, n=1), "fog", 1).shape == (1, 32, 32, 3)  # others unaffected
    finally:
        C._frost_textures.cache_clear()
