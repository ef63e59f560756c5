"""Tune UniEnt, UniEnt+, OSTTA and Tent+COME by the paper's protocol and print the H-score tables.

The authors publish no per-hyperparameter-set choice of UniEnt's α₁, α₂ or OSTTA's α (gaozhengqing/UniEnt
``run.sh`` only grid-searches α ∈ {1, 0.5, 0.2, 0.1}), nor any CIFAR learning rate for COME.
STAMP's protocol (paper App. A, protocol.md §5) picks hyperparameters by the H-score on the
first corruption, gaussian noise, with the Noise outlier set; this script runs those grids
that way and prints one table per method and hyperparameter set, best row marked.

Grids: UniEnt/UniEnt+ α₁ × α₂ and OSTTA α over {1, 0.5, 0.2, 0.1} (``run.sh``), under each
optimiser the authors use (Adam for the CIFAR hyperparameter sets, SGD for ImageNet-C); Tent+COME's Adam
learning rate over STAMP's Tent grid {1e-4, 2.5e-4, 1e-3, 5e-3} (``test-time-val.sh``). Its
ImageNet-C value is the COME authors' (SGD, 2.5e-4) and is not tuned.

A thin call of ``stamplib.experiments.tune`` (``python -m stamplib tune``): each method's preset
grid under each optimiser's hyperparameter set is one tuning job. Every cell goes through the results store
(``--results``), so a second call only prints; the tables are also written under ``--out``
(default ``figures/tune``).

Usage (built-in benchmark, what the configs use):
    python benchmarks/tune_newer_methods.py --profile quick
On the real CIFAR-10 once its source model exists, e.g.:
    python benchmarks/tune_newer_methods.py --dataset cifar10_jpeg --data-root /work/shared/data
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator

#: Which hyperparameter set supplies the optimiser: Adam (the CIFAR ones) or SGD (ImageNet-C).
HYPERPARAMETER_SET_OF_OPTIMISER = {"adam": "cifar10_c", "sgd": "imagenet_c"}
#: The optimisers each method is tuned under (Tent+COME's ImageNet-C value is not tuned).
OPTIMISERS = {"unient": ("adam", "sgd"), "unient_plus": ("adam", "sgd"), "ostta": ("adam", "sgd"),
              "tent_come": ("adam",)}


def hyperparameter_sets(method: str) -> Iterator[str]:
    """The hyperparameter sets ``method`` is tuned under, one tuning job each."""
    if method not in OPTIMISERS:
        raise ValueError(f"no grid for {method!r}; choose from {', '.join(OPTIMISERS)}")
    for optimiser in OPTIMISERS[method]:
        yield HYPERPARAMETER_SET_OF_OPTIMISER[optimiser]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="unient,unient_plus,ostta,tent_come")
    ap.add_argument("--dataset", default="digits")
    ap.add_argument("--outlier-set", default="noise")
    ap.add_argument("--corruption", default="gaussian_noise", help="the protocol tunes on the first one")
    ap.add_argument("--profile", default="quick", choices=["smoke", "quick", "full"])
    ap.add_argument("--data-root", default="")
    ap.add_argument("--results", default=None, help="results folder (default: the results store)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="folder of the tables (default: figures/tune)")
    args = ap.parse_args()

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from stamplib.experiments import tune
    from stamplib.paths import RunContext
    from stamplib.report import tuning

    context = RunContext.build(args.data_root, args.results, device=args.device)
    print(f"tuning on {args.dataset} + {args.outlier_set}, {args.corruption}, profile {args.profile}, "
          f"seed {args.seed}; results in {context.results}")
    for method in args.methods.split(","):
        for hyperparameter_set in hyperparameter_sets(method):
            job = tune.TuneJob(method, dataset=args.dataset, outlier_set=args.outlier_set, corruption=args.corruption,
                               profile=args.profile, seed=args.seed, hyperparameter_set=hyperparameter_set,
                               grid=tuple(tune.preset_grid(method, method, hyperparameter_set).items()))
            result = tune.tune(job, context)
            print(f"\n{method}, optimiser of hyperparameter set {hyperparameter_set}:")
            print(tuning.format_result(result))
            tuning.write_outputs(result, args.out or context.figures / "tune")
    return 0


if __name__ == "__main__":
    sys.exit(main())
