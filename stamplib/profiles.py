"""Run profiles: how much of the protocol a notebook computes.

* ``smoke`` — seconds; for CI: few ID samples, two corruptions.
* ``quick`` — the built-in benchmark at teaching scale on a laptop CPU (minutes).
* ``full``  — the paper's scale: all 15 corruptions, every sample (a GPU job).
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_CORRUPTIONS = (
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur",
    "motion_blur", "zoom_blur", "snow", "frost", "fog", "brightness", "contrast",
    "elastic_transform", "pixelate", "jpeg_compression",
)


@dataclass(frozen=True)
class Profile:
    name: str
    max_id: int | None  # ID samples per corruption (None: the whole set)
    corruptions: tuple[str, ...]  # default corruptions of the notebooks
    seeds: tuple[int, ...] = (0,)


PROFILES: dict[str, Profile] = {
    "smoke": Profile("smoke", max_id=256, corruptions=("gaussian_noise", "contrast")),
    "quick": Profile(
        "quick",
        max_id=None,
        corruptions=("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "contrast", "pixelate"),
    ),
    "full": Profile("full", max_id=None, corruptions=ALL_CORRUPTIONS),
}


def get_profile(name: str) -> Profile:
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}")
    return PROFILES[name]
