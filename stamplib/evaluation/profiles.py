"""Run profiles: how much of the protocol a notebook computes.

* ``smoke`` — seconds; for CI: few ID samples, one corruption, on the built-in digits.
* ``quick`` — the built-in CIFAR-10 photographs at teaching scale on a laptop CPU (minutes).
* ``full``  — the paper's scale: all 15 corruptions, every sample (a GPU job).
* ``stream`` — the paper's stream length on CIFAR-10 (10,000 known-class images + 2,500
  outliers per corruption, about 196 batches) for the compact built-in network: the claims on
  the step-size decay, which a shorter stream cannot decide (:mod:`stamplib.evidence.ledger`).
  No notebook runs it; ``python -m stamplib claims compute --benchmark builtin --design stream`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from stamplib import validation
from stamplib.data.corruptions import CORRUPTIONS
from stamplib.data.registry import Dataset


@dataclass(frozen=True)
class Profile:
    name: str
    max_id: int | None  # ID samples per corruption on the built-in benchmark (None: all)
    corruptions: tuple[str, ...]  # default corruptions of the notebooks
    max_id_real: int | None = None  # ID samples per corruption on real data sets
    # The seeds of the headline tables (notebooks 02, 04, 05 and the README's first figure) on
    # the built-in benchmark, where a cell costs seconds: their spread says which differences
    # between methods are bigger than the noise. Every other notebook, and every
    # notebook on real data or at paper scale, runs seed 0 unless its ``seeds`` says otherwise.
    headline_seeds: tuple[int, ...] = (0,)
    # Notebook 13's batch sizes: a batch of one sample costs a step per sample (CoTTA and SoTTA
    # most), so the quick profile leaves it to the full one.
    stress_batch_sizes: tuple[int, ...] = (1, 4, 16, 64)
    # The built-in benchmark the notebooks run on without a data root: the CIFAR-10 photographs
    # (data/builtin_cifar10.py), or the digits, which CI's smoke runs keep for speed.
    builtin: str = "cifar10_builtin"

    def id_limit(self, dataset: Dataset) -> int | None:
        """How many ID samples per corruption a stream of ``dataset`` takes in this profile."""
        return self.max_id if dataset.builtin else self.max_id_real


# quick: 3 corruptions (one noise, one blur, one digital) × 1,024 photographs + 256 outliers,
# which keeps every notebook's grid within the budget of run_all.sh on 2 CPU cores.
PROFILES: dict[str, Profile] = {
    "smoke": Profile("smoke", max_id=64, corruptions=("gaussian_noise",), max_id_real=64, builtin="digits"),
    "quick": Profile(
        "quick", max_id=1024, corruptions=("gaussian_noise", "defocus_blur", "contrast"), max_id_real=2000,
        headline_seeds=(0, 1, 2), stress_batch_sizes=(4, 16, 64),
    ),
    "full": Profile("full", max_id=None, corruptions=CORRUPTIONS, max_id_real=None),
    "stream": Profile("stream", max_id=None, corruptions=CORRUPTIONS, max_id_real=None, headline_seeds=(0, 1, 2)),
}


def get_profile(name: str) -> Profile:
    return PROFILES[validation.check_choice("profile", name, PROFILES)]
