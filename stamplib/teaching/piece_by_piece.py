"""Lesson 16, *STAMP piece by piece*: from Tent to STAMP one component at a time — augmentation
averaging, SAM, the cosine step size, the reliable class-balanced memory, self-weighting —
along Table 5's rows (:data:`stamplib.experiments.course.PATH_ROWS`), the H of each step over
the seeds whose records exist, and how the steps map to the paper's Table 5.

Exercises: STAMP's self-weighted entropy, the class-balanced memory's eviction rule, the cosine
step size.
"""

from __future__ import annotations

import functools
import math
import numbers
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import torch

from stamplib import methods
from stamplib.blocks.memory import ClassBalancedMemory
from stamplib.evaluation.record import Record
from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import plans
from stamplib.experiments.course import PIECE_BY_PIECE, SINGLE_VIEW
from stamplib.methods.stamp import cosine_step_size as stamp_cosine_step_size
from stamplib.models import resnet_cifar_tiny
from stamplib.report.frames import plan_frame
from stamplib.report.paper import paper_value
from stamplib.teaching.exercises import (
    Trial,
    WrongReturn,
    close,
    exercise,
    integer,
    kind_of,
    largest_difference,
    reproduced,
    returned_number,
    returned_tensor,
    two_numbers,
    uniform,
    wrong,
)
from stamplib.teaching.records import STAMP_COLOUR, seed_spread

LESSON = PIECE_BY_PIECE.notebook


# ------------------------------------------------------------------------------- the path


@dataclass(frozen=True)
class Step:
    """One step of the path: what it adds, and the Table 5 row (1–7; 0: Tent, not in Table 5)."""

    name: str
    adds: str
    variant: str  # the plan's variant label ("" for Tent)
    table5_row: int


def _row(sam: bool, lr_decay: bool, memory: bool, weighting: bool) -> tuple[str, int]:
    row = (sam, lr_decay, memory, weighting)
    return plans.ablation_label(*row), plans.ABLATION_ROWS.index(row) + 1


STEPS = (
    Step("Tent", "entropy minimisation on each batch (Adam, every BatchNorm layer, one view)", "", 0),
    Step("+ views averaging", "prediction and OOD score averaged over 16 augmented views; entropy minimisation "
         "on the batch with STAMP's plain SGD (lr 0.1, the last stage frozen)", *_row(False, False, False, False)),
    Step("+ SAM", "sharpness-aware steps: the update is taken where the loss is highest nearby (ρ = 0.05)",
         *_row(True, False, False, False)),
    Step("+ cosine step size", "the step size follows a cosine from 0.1 down over 150 steps (and up again)",
         *_row(True, True, False, False)),
    Step("+ reliable memory", "adapt on a class-balanced memory of 64 reliable samples (low entropy, label "
         "consistent with the source weights) instead of the whole batch", *_row(True, True, True, False)),
    Step("+ self-weighting = STAMP", "weight each memory sample's entropy by softmax(−entropy), gradient kept",
         *_row(True, True, True, True)),
)
#: The rows of Table 5 the path skips, and STAMP without views averaging (Fig. 4's K = 1).
OFF_PATH = tuple(Step(name, adds, variant, row) for name, adds, variant, row in (
    ("cosine step size alone", "Table 5's row 2: no SAM, no memory", *_row(False, True, False, False)),
    ("self-weighting without memory", "Table 5's row 5: self-weighted entropy on the batch",
     *_row(True, True, False, True)),
    ("STAMP with one view", "Fig. 4 (notebook 09): no augmentation averaging (K = 1)", SINGLE_VIEW, 0),
))
#: What the paper's columns show for a step that is not a row of Table 5 (Tent).
NOT_IN_TABLE5 = "— (not in Table 5)"
#: The paper's Table 5 cell (CIFAR100-C with SVHN-C outliers).
TABLE5_CELL = ("cifar100_c", "svhn")


def path_table(plan: plans.Plan, records: Mapping[str, Record], stores: Sequence[tuple[str, ResultsStore]],
               off_path: plans.Plan | None = None,
               off_path_records: Mapping[str, Record] | None = None) -> pd.DataFrame:
    """One row per step (then the off-path rows stored): ACC, AUROC, H (mean over corruptions),
    H on each corruption, H over the seeds found (text), and the paper's Table 5 row with its
    ACC, AUROC and H."""
    frame = plan_frame(plan, records, per_corruption=True)
    if off_path is not None and off_path_records:
        frame = pd.concat([frame, plan_frame(off_path, off_path_records, per_corruption=True)], ignore_index=True)
    specs = {c.variant: c.spec for c in plan.cells}  # Tent's variant is ""
    if off_path is not None:
        specs.update({c.variant: c.spec for c in off_path.cells})
    rows = []
    for step in (*STEPS, *OFF_PATH):
        method = "tent" if not step.variant else "stamp"
        mine = frame[(frame["variant"] == step.variant) & (frame["method"] == method)] \
            if not frame.empty else frame
        if mine.empty:
            if step in STEPS:
                rows.append({"step": step.name, "adds": step.adds, "Table 5 row": step.table5_row or "—"})
            continue
        mean = mine[mine["corruption"] == "mean"].iloc[0]
        row: dict[str, Any] = {"step": step.name, "adds": step.adds, "Table 5 row": step.table5_row or "—",
                               "ACC": mean["acc"], "AUROC": mean["auroc"], "H": mean["h"]}
        per_corruption = mine.set_index("corruption")["h"]
        for corruption in specs[step.variant].corruptions:  # in stream order
            if corruption in per_corruption:
                row[f"H {corruption.replace('_', ' ')}"] = per_corruption[corruption]
        spread = seed_spread(specs[step.variant], stores)
        row["H over seeds"] = spread.text()
        row["H lowest seed"], row["H highest seed"] = spread.low, spread.high
        for metric in ("acc", "auroc", "h"):
            value = paper_value("5", *TABLE5_CELL, "stamp", metric, variant=step.variant) if step.table5_row else None
            # Tent is not a row of Table 5: say so rather than show NaN
            row[f"paper {metric.upper()}"] = NOT_IN_TABLE5 if not step.table5_row else math.nan if value is None \
                else value
        rows.append(row)
    return pd.DataFrame(rows)


def schedule_text(plan: plans.Plan, records: Mapping[str, Record]) -> str:
    """How far STAMP's cosine step size falls within one corruption's stream (before the reset),
    from its configuration and the number of batches in its record's trace."""
    spec = next((c.spec for c in reversed(plan.cells) if c.spec.method == "stamp"), None)
    record = records.get(spec.key()) if spec is not None else None
    if record is None or not record.trace:
        return "STAMP's record is missing: compute the cells first."
    config = spec.config
    batches = max(len(t.n_passed) for t in record.trace.values())
    # the last step of a corruption's stream is step batches − 1 (steps count from 0): its step size
    # is the lowest the stream uses
    end = stamp_cosine_step_size(config.lr, batches - 1, config.period, periodic=True)
    return (f"Here a corruption's stream has {batches} batches (at most as many adaptation steps) and STAMP is reset "
            f"before the next, while the period is T = {config.period} adaptation steps: the step size only falls "
            f"from η₀ = {config.lr:g} to {end:.4g} at the last step it can take ({100 * end / config.lr:.0f} % of "
            "η₀) before each reset.")


#: The legends' type size in the path figure (points): readable where the figure is saved.
PATH_LEGEND_POINTS = 10


def plot_path(table: pd.DataFrame) -> plt.Figure:
    """H of each step of the path on our benchmark (mean and per corruption, and the mean's range
    over the seeds whose records exist), and, on an axis of its own beside it, the paper's Table 5
    H of the same rows: another benchmark (CIFAR100-C + SVHN-C, a ResNet-18), whose numbers are
    not ours to compare; only the direction of each step is."""
    steps = table[table["step"].isin([s.name for s in STEPS])]
    x = list(range(len(steps)))
    paper = pd.to_numeric(steps["paper H"], errors="coerce") if "paper H" in steps else pd.Series(dtype=float)
    with_paper = bool(paper.notna().any())
    fig, axes = plt.subplots(1, 2 if with_paper else 1, figsize=(15, 4.4) if with_paper else (10, 4.4), squeeze=False,
                             gridspec_kw={"width_ratios": [5, 3]} if with_paper else None)
    ours = axes[0][0]
    per_corruption = [c for c in steps.columns if c.startswith("H ") and "seed" not in c]
    # corruptions in grey, told apart by marker and dash: the palette's colours belong to methods
    styles = [("o", "-"), ("s", "--"), ("^", ":"), ("D", "-."), ("v", (0, (5, 1)))]
    for i, column in enumerate(per_corruption):
        marker, dash = styles[i % len(styles)]
        ours.plot(x, steps[column], marker=marker, linestyle=dash, color="0.45", linewidth=1, alpha=0.8,
                  label=column[2:])
    ours.plot(x, steps["H"], marker="o", linewidth=2.5, color=STAMP_COLOUR, label="mean over corruptions")
    if "H lowest seed" in steps:  # the seed spread the lesson reads each step against
        low, high = (pd.to_numeric(steps[c], errors="coerce") for c in ("H lowest seed", "H highest seed"))
        ours.fill_between(x, low, high, color=STAMP_COLOUR, alpha=0.2, linewidth=0,
                          label="mean: lowest to highest seed")
    ours.set(ylabel="H-score (%)", ylim=(0, 100), title="ours: built-in CIFAR-10 + Noise, compact ResNet")
    panels = [(ours, steps["step"])]
    if with_paper:
        theirs = axes[0][1]
        rows = paper.notna().to_numpy()
        theirs.plot([i for i, kept in zip(x, rows) if kept], paper[rows], marker="x", linestyle="--", color="black",
                    label="H, paper's Table 5")
        theirs.set(ylabel="H-score (%), paper's Table 5", ylim=(0, 100),
                   title="the paper: CIFAR100-C + SVHN-C, ResNet-18\n(another benchmark: compare directions only)")
        theirs.set_xlim(ours.get_xlim())
        panels.append((theirs, [f"row {row}" if isinstance(row, int) and row else "not in\nTable 5"
                                for row in steps["Table 5 row"]]))
    for ax, labels in panels:
        ax.set_xticks(x, [textwrap.fill(label, 11) for label in labels], fontsize=9)
        ax.title.set_fontsize(11)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=PATH_LEGEND_POINTS)
    fig.suptitle("From Tent to STAMP, one component at a time")
    fig.tight_layout()
    return fig


def _shown(value: float) -> float:
    """``value`` as the table prints it (one decimal): a change is the difference of the numbers the
    reader sees, so that 44.4 → 44.5 reads +0.1, never +0.0 (issue 83)."""
    return float(f"{value:.1f}")


def path_text(table: pd.DataFrame) -> str:
    """Each step's change of H, in words, and where the path ends against Tent."""
    steps = table[table["step"].isin([s.name for s in STEPS])].dropna(subset=["H"]) if "H" in table else table
    if len(steps) < 2:
        return "The path's records are missing: compute the cells first."
    pairs = list(zip(steps.iloc[:-1].iterrows(), steps.iloc[1:].iterrows()))
    moves = [f"{b['step']} {_shown(b['H']) - _shown(a['H']):+.1f}" for (_, a), (_, b) in pairs]
    first, last = steps.iloc[0], steps.iloc[-1]
    biggest = max(((_shown(b["H"]) - _shown(a["H"]), b["step"]) for (_, a), (_, b) in pairs))
    return (f"Mean H from {first['step']} ({first['H']:.1f}) to {last['step']} ({last['H']:.1f}), step by step: "
            f"{'; '.join(moves)}. " + (f"The largest single gain: {biggest[1]} ({biggest[0]:+.1f})." if biggest[0] > 0
                                       else "No step raises the mean H here."))


def step_text(table: pd.DataFrame, step: str) -> str:
    """What ``step`` of the path did here against the step before it: its mean ACC, AUROC and H,
    each with the direction it moved (from the records, never assumed)."""
    steps = table[table["step"].isin([s.name for s in STEPS])].reset_index(drop=True)
    at = steps.index[steps["step"] == step]
    if len(at) == 0 or at[0] == 0 or steps.loc[at[0], ["H"]].isna().any() or steps.loc[at[0] - 1, ["H"]].isna().any():
        return f"The records of {step} and the step before it are missing: compute the cells first."
    before, after = steps.loc[at[0] - 1], steps.loc[at[0]]

    def moved(metric: str) -> str:
        change = _shown(after[metric]) - _shown(before[metric])
        verb = "rises" if change > 0 else "falls" if change < 0 else "stays"
        if not change:
            return f"{metric} stays at {after[metric]:.1f}"
        return f"{metric} {verb} from {before[metric]:.1f} to {after[metric]:.1f} ({change:+.1f})"

    verdict = ("a better OOD score, as the idea promises" if after["AUROC"] > before["AUROC"] else
               "a worse OOD score, against what the idea promises")
    return (f"Here, from {before['step']} to {step}: {moved('AUROC')}, {moved('ACC')}, {moved('H')}: {verdict}, on the "
            "mean over corruptions (the figure's grey lines show each corruption).")


# ------------------------------------------------------------------------------- exercises


def cosine_step_size(lr0: float, step: int, period: int) -> float:
    """STAMP's step size before the (step+1)-th adaptation step: lr0 · ½ · (1 + cos(π · step /
    period)), periodic in ``step`` as PyTorch's CosineAnnealingLR (it rises again after
    ``period`` steps, docs/spec/stamp.md §4.5)."""
    return lr0 * 0.5 * (1.0 + math.cos(math.pi * step / period))


def _cosine_cases(generator: torch.Generator) -> list[tuple[float, int, int]]:
    """(lr0, step, period): the first and the last step of the descent and the steps around
    ``period`` and ``2·period`` (where a schedule held at 0, restarted, or off by one shows),
    for STAMP's T = 150 and a short T = 5; then random ones, past ``period`` from the sixth on."""
    cases = [(0.1, step, 150) for step in (0, 1, 75, 149, 150, 151, 225, 299, 300, 301)]
    cases += [(0.05, step, 5) for step in (0, 4, 5, 6, 8, 10)]
    for case in range(8):
        lr0, period = uniform(generator, 0.001, 0.5), integer(generator, 5, 300)
        cases.append((lr0, integer(generator, 0, period) if case < 5 else integer(generator, period + 1, 3 * period),
                      period))
    return cases


@exercise(LESSON, "The cosine step size", cosine_step_size, "`stamplib.methods.stamp.cosine_step_size`")
def _check_cosine(answer: Any, generator: torch.Generator) -> list[str]:
    trials = []
    for lr0, step, period in _cosine_cases(generator):
        expected = stamp_cosine_step_size(lr0, step, period, periodic=True)
        got = returned_number(answer(lr0, step, period), "the step size")
        # float32's cos rounds to ~1e-7 of lr0; an off-by-one step moves it ≥ 2e-5 · lr0; an absolute
        # tolerance, as a fraction of the largest value of 1 (lr0 ≤ 0.5)
        tolerance = 1e-6 * lr0
        known = [
            ("after `period` steps the authors' schedule rises again (PyTorch's CosineAnnealingLR is periodic); "
             "do not hold it at 0", stamp_cosine_step_size(lr0, step, period, periodic=False)),
            ("it starts again from lr0 after every period (step % period); the authors' schedule (PyTorch's "
             "CosineAnnealingLR) climbs back along the cosine, from 0 at step = period to lr0 at 2·period",
             stamp_cosine_step_size(lr0, step % period, period, periodic=True)),
            ("the ½ is missing: lr0 · ½ · (1 + cos(π·step/period)) starts at lr0", 2 * expected),
            ("the angle is π · step / period radians, not 180 · step / period",
             lr0 * 0.5 * (1 + math.cos(180 * step / period))),
            ("off by one: it gives the step size one step later (step + 1) on every case; the step size before "
             "the first step (step 0) is lr0", stamp_cosine_step_size(lr0, step + 1, period, periodic=True)),
            ("its period is 2·period (the angle π·step / (2·period)): the step size reaches 0 at step = period",
             stamp_cosine_step_size(lr0, step, 2 * period, periodic=True)),
        ]
        trials.append((Trial(got, expected, known, tolerance), lr0, step, period))
    failing = next(((t, lr0, step, period) for t, lr0, step, period in trials if wrong(t)), None)
    if failing is None:
        return []
    trial, lr0, step, period = failing
    if message := reproduced([t for t, *_ in trials]):
        return [message]
    if floor := _floor_of(trials):
        return [f"its step size never falls below {floor:.3g}: at step = period it gives {floor:.3g} where the "
                "authors' schedule reaches 0 (η_min = 0, PyTorch's CosineAnnealingLR default): leave out the floor"]
    shown, right = two_numbers(trial.got, trial.expected)
    # a small difference reads like rounding: say that it is larger than float rounding (issue 83)
    return [f"lr0={lr0:g}, step {step}, period {period}: expected {right}, got {shown} (off by "
            f"{abs(trial.got - trial.expected):.2g}, beyond the check's tolerance of {float(trial.tolerance):.2g}: "
            "more than float rounding)"]


def _floor_of(trials: Sequence[tuple[Trial, float, int, int]]) -> float | None:
    """The η_min > 0 the answer holds the step size above on every case, as η_min + (lr0 − η_min)·½(1 +
    cos(π·step/period)), read where the authors' schedule is 0 (step = period); None if it does not."""
    at_zero = [t.got for t, lr0, step, period in trials if t.expected == 0.0 and step == period]
    if not at_zero or not at_zero[0] > 0:
        return None
    floor = float(at_zero[0])
    follows = all(abs(t.got - (t.expected + floor * (1 - t.expected / lr0))) <= float(t.tolerance) + 1e-12
                  for t, lr0, _, _ in trials)
    return floor if follows else None


def eviction_candidates(class_counts: Sequence[int], xi: Sequence[float], capacity: int) -> list[int]:
    """The classes a class-balanced memory may evict from when a new sample arrives: none while
    it holds fewer than ``capacity`` samples; else the classes present in it (count > 0) whose
    class-frequency EMA ξ is the largest among them, in class order."""
    if sum(class_counts) < capacity:
        return []
    present = [c for c, count in enumerate(class_counts) if count > 0]
    top = max(xi[c] for c in present)
    return [c for c in present if xi[c] == top]


#: (class counts, ξ, capacity) of the fixed boundary cases, four classes and a capacity of 8: a
#: memory at capacity − 1, at capacity (the largest ξ present, then absent), at capacity + 1, with
#: two present classes tied at the top, one class wide, with ξ and the counts disagreeing, and ξ
#: a fraction near a tie (1e-4 below the largest, 0.98 below it, 0.5 below it: only an exact tie is
#: a tie; float32 keeps these apart, it resolves 2.4e-7 there).
EVICTION_CASES = (
    ([3, 0, 4, 0], [2.0, 0.0, 3.0, 1.0], 8),
    ([3, 0, 5, 0], [2.0, 0.0, 3.0, 1.0], 8),
    ([3, 0, 5, 0], [2.0, 9.0, 3.0, 1.0], 8),
    ([3, 0, 6, 0], [2.0, 0.0, 3.0, 1.0], 8),
    ([4, 0, 4, 0], [3.0, 5.0, 3.0, 1.0], 8),
    ([8, 0, 0, 0], [1.0, 4.0, 2.0, 0.0], 8),
    ([1, 5, 2, 0], [4.0, 1.0, 4.0, 0.0], 8),
    ([3, 0, 5, 0], [2.5, 0.0, 2.5001, 1.0], 8),
    ([2, 3, 3, 0], [1.75, 0.77, 1.25, 3.5], 8),
    ([4, 2, 2, 0], [0.3, 1.28, 0.31, 0.0], 8),
)


def _memory_holding(counts: Sequence[int], xi: Sequence[float], capacity: int) -> ClassBalancedMemory:
    """A :class:`ClassBalancedMemory` of ``capacity`` holding ``counts`` samples per class (more
    than ``capacity`` in all, where asked), with ξ set."""
    labels = torch.tensor([c for c, n in enumerate(counts) for _ in range(n)], dtype=torch.long)
    memory = ClassBalancedMemory(len(counts), max(capacity, len(labels)))
    memory.add(torch.zeros(len(labels), 1), labels)
    memory.capacity = capacity  # filled past it without evicting: the state a rule must still handle
    memory.xi = torch.tensor(xi, dtype=torch.float64)
    return memory


def _eviction_cases(generator: torch.Generator) -> Iterator[tuple[list[int], list[float], int]]:
    """The fixed boundary cases, then random ones: ξ rounded in half of them (so that ties occur),
    a fraction in the others, with a present class a fraction below the largest."""
    for counts, xi, capacity in EVICTION_CASES:
        yield list(counts), list(xi), capacity
    for case in range(8):
        num_classes, capacity = integer(generator, 3, 10), integer(generator, 4, 32)
        total = capacity if case % 4 != 3 else integer(generator, 1, capacity - 1)
        labels = torch.randint(num_classes, (total,), generator=generator)
        if case == 0:  # the memory one class wide (lesson 17's contrast stream)
            labels[:] = labels[0]
        counts = torch.bincount(labels, minlength=num_classes).tolist()
        xi = torch.rand(num_classes, generator=generator, dtype=torch.float64) * 4
        xi = (xi.round() if case % 2 == 0 else xi).tolist()  # rounded: ties
        present = [c for c in range(num_classes) if counts[c]]
        if case % 2 == 1 and len(present) > 1:  # a near tie: a fraction below the largest present ξ
            xi[present[-1]] = max(xi[c] for c in present) - uniform(generator, 1e-4, 0.99)
        if case == 1 and len(present) > 1:  # two present classes tie at the top
            xi[present[0]] = xi[present[-1]] = max(xi) + 1.0
        absent = [c for c in range(num_classes) if counts[c] == 0]
        if absent:
            xi[absent[0]] = max(xi) + 5.0  # an absent class with the largest EMA
        yield counts, xi, capacity


@exercise(LESSON, "The class-balanced memory's eviction rule", eviction_candidates,
          "`stamplib.blocks.memory.ClassBalancedMemory` (STAMP's memory, stamp.md §4.3)")
def _check_eviction(answer: Any, generator: torch.Generator) -> list[str]:
    cases, trials = [], []
    for counts, xi, capacity in _eviction_cases(generator):
        expected = _memory_holding(counts, xi, capacity).eviction_candidates()
        got = _class_list(answer(list(counts), list(xi), capacity))
        cases.append((counts, xi, capacity, expected, got))
        shifted = [("its class ids are off by one (numbered from 1): class c is index c of `class_counts` and `xi`, "
                    "counted from 0", [c + 1 for c in expected]),
                    ("its class ids are off by one (one lower): class c is index c of `class_counts` and `xi`",
                     [c - 1 for c in expected])]
        trials.append(Trial(got, expected, shifted))
    failing = next((case for case in cases if case[3] != case[4]), None)
    if failing is None:
        return []
    if message := reproduced(trials):
        return [message]
    counts, xi, capacity, expected, got = failing
    total = sum(counts)
    present = [c for c, n in enumerate(counts) if n]
    case = f"counts {counts}, ξ {xi}, capacity {capacity}"
    if sorted(got) == expected:
        return [f"it gives the candidates {got} ({case}); return them in class order, {expected}, as the exercise "
                "says"]
    got = sorted(got)
    if total < capacity and got:
        one_short = " (capacity − 1: room for one more)" if total == capacity - 1 else ""
        return [f"the memory holds {total} samples of {capacity}{one_short}, so it still has room here: nothing "
                f"is evicted until it holds `capacity` samples ({case}: it gives {got})"]
    absent = [c for c in got if c not in present]
    if absent:
        top_present = max((xi[c] for c in present), default=-math.inf)
        named = [c for c in absent if 0 <= c < len(counts)]
        if not named:
            return [f"it gives class {absent[0]}, which is not a class here (classes 0 to {len(counts) - 1}; "
                    f"{case}: it gives {got})"]
        large = [c for c in named if xi[c] >= top_present]
        why = (f"; an absent class with a large ξ (class {large[0]}: {xi[large[0]]:g}) is skipped" if large else "")
        return [f"it evicts from class {named[0]}, which has no sample in the memory (count 0, ξ {xi[named[0]]:g}): "
                f"only a present class can lose one{why} ({case}: it gives {got})"]
    if not got and total > capacity:
        return [f"the memory holds more than `capacity` samples ({total} of {capacity}) and it gives no candidate: "
                "a memory at or over capacity evicts (sum of the counts ≥ capacity)"]
    if not got and max(xi) > max(xi[c] for c in present):
        return [f"the memory is full, an absent class has the largest ξ, and it gives no candidate ({case}): the "
                "largest ξ is taken among the present classes only (over all classes, no present class reaches it)"]
    if not got:
        return [f"the memory is full (it holds {total} = `capacity` samples) and it gives no candidate ({case}): "
                "the next insertion evicts, so the present classes with the largest ξ are candidates"]
    def by_counts(counts: list[int], capacity: int) -> list[int]:
        return [] if sum(counts) < capacity else _largest(counts, [c for c, n in enumerate(counts) if n])

    mistaken = [by_counts(counts, capacity) for counts, _, capacity, _, _ in cases]
    if all(m == case[4] for m, case in zip(mistaken, cases)) and any(m != case[3] for m, case in zip(mistaken, cases)):
        return ["it picks by the current counts on every case; the rule uses the class-frequency EMA ξ (it "
                "remembers which classes were frequent, Eq. 5)"]
    top = max(xi[c] for c in present)
    below = [c for c in got if c in present and xi[c] < top]
    if below and set(expected) <= set(got):
        c = max(below, key=lambda k: xi[k])
        near_tie = ", a near tie is not a tie" if top - xi[c] < 1 else ""
        return [f"it gives class {c} too, whose ξ ({xi[c]:g}) is {top - xi[c]:.4g} below the largest ξ among the "
                f"present classes ({top:g}; {case}): only classes whose ξ equals the largest are candidates{near_tie}"]
    missed = [c for c in expected if c not in got]
    if missed and set(got) <= set(expected):
        return [f"classes {expected} tie at the largest ξ ({top:g}) and it gives only {got} ({case}): with ties "
                "every present class with the largest ξ is a candidate (the memory then picks one at random)"]
    return [f"{case}: the candidates are {expected}, it gives {got}"]


def _class_list(value: Any) -> list[int]:
    """The answer's candidates as they came, in its order; :class:`WrongReturn` unless a list of
    class ids (the exercise asks for a list in class order: a set has no order)."""
    if not isinstance(value, list):
        raise WrongReturn(f"it returns {kind_of(value)}; return a list of the classes in class order (`[]` when "
                          "there is none), as the exercise says" + (": a set has no order" if isinstance(
                              value, set | frozenset) else ""))
    if not all(isinstance(c, numbers.Integral) and not isinstance(c, bool) for c in value):
        raise WrongReturn(f"it returns the list {value!r}; return class ids as Python ints (`int(c)`)")
    return [int(c) for c in value]


def _largest(values: Sequence[float], among: Sequence[int]) -> list[int]:
    """The classes of ``among`` whose value is the largest there."""
    top = max(values[c] for c in among)
    return [c for c in among if values[c] == top]


def self_weighted_entropy(logits: torch.Tensor, scale: int) -> torch.Tensor:
    """STAMP's loss on the memory (docs/spec/stamp.md §4.4): the entropy H_i of each sample, weighted by
    w = softmax(−H) with its gradient kept, scaled by ``scale`` (the memory's capacity) and
    averaged: mean_i(H_i · scale · w_i)."""
    log_p = torch.log_softmax(logits, dim=1)
    entropy = -(log_p.exp() * log_p).sum(dim=1)
    weights = torch.softmax(-entropy, dim=0)  # confident samples weigh more; not detached
    return (entropy * scale * weights).mean()


def stamp_for_checks(num_classes: int, seed: int, sharpen: float = 1.0, **overrides: Any) -> methods.TTAMethod:
    """A STAMP around a small random network (its loss and filters need no trained weights);
    ``sharpen`` scales the last layer, so that its predictions range from unsure to confident."""
    torch.manual_seed(seed)
    network = resnet_cifar_tiny(num_classes)
    last = [m for m in network.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        last.weight.mul_(sharpen)
    return methods.create("stamp", network, num_classes, hyperparameter_set="cifar10_c", seed=seed, **overrides)


@functools.cache
def _loss_stamp() -> methods.TTAMethod:
    """One STAMP whose loss the check calls: the loss depends on its configuration only, not on
    its network or the number of classes, so one is built per process."""
    return stamp_for_checks(10, 0)


def _self_weighting_cases(generator: torch.Generator) -> Iterator[tuple[torch.Tensor, int]]:
    """(logits, scale): fixed boundary cases — confident and unsure samples side by side at the
    memory's capacity 64, equal rows (equal weights), one sample (its weight is 1), and a confident
    network's float32 logits in the hundreds (where softmax rounds a probability to 0 and
    softmax(...).log() gives −inf: lesson 14's stable form is needed) — then random ones."""
    fixed = torch.Generator().manual_seed(52)
    spread = torch.linspace(0.1, 8, 8, dtype=torch.float64)[:, None]
    yield torch.randn(8, 10, generator=fixed, dtype=torch.float64) * spread, 64
    yield torch.randn(1, 10, generator=fixed, dtype=torch.float64).repeat(6, 1), 64
    yield torch.randn(1, 10, generator=fixed, dtype=torch.float64) * 3, 64
    yield (torch.randn(8, 10, generator=fixed) * 100).float(), 64
    num_classes = integer(generator, 2, 20)
    for _ in range(5):
        n, scale = integer(generator, 1, 64), integer(generator, 1, 128)
        yield torch.randn(n, num_classes, generator=generator, dtype=torch.float64) * uniform(generator, 0.5, 5), scale


@exercise(LESSON, "STAMP's self-weighted entropy", self_weighted_entropy,
          "STAMP's own loss (`stamplib.methods.stamp.Stamp.loss`, weighting `adaptive`)")
def _check_self_weighted_entropy(answer: Any, generator: torch.Generator) -> list[str]:
    stamp = _loss_stamp()
    trials, answered = [], []
    for logits, scale in _self_weighting_cases(generator):
        reference = logits.clone().requires_grad_(True)
        expected = stamp.loss(reference, scale)
        (expected_grad,) = torch.autograd.grad(expected, reference)
        given = logits.clone().requires_grad_(True)
        result = answer(given, scale)
        got = returned_tensor(result, "the loss as a 0-d tensor")
        if got.numel() == 1 and bool(got.isnan().any()) and not bool(expected.isnan()):
            if any(wrong(t) for t, _, _ in trials):
                break  # wrong on an earlier case already: the message is that case's
            unstable = torch.softmax(logits, 1)
            if bool((-(unstable * unstable.log()).sum(1)).isnan().any()):  # the cause, tried on this very case
                return ["it gives nan on a confident network's logits (in the hundreds, float32): softmax rounds a "
                        "probability to 0 there and log(0) = −inf, so p·log p is 0·(−inf) = nan; compute the entropy "
                        "from log_softmax, stably, as in lesson 14 (torch.log_softmax, p = exp(log p))"]
            return [f"it gives nan on logits of shape {list(logits.shape)} with scale {scale}, where STAMP's loss is "
                    f"{float(expected):.6g}"]
        if got.numel() != 1:
            return [f"it returns shape {tuple(got.shape)} for {len(logits)} samples; STAMP's loss is one number, the "
                    "mean over the samples of H · scale · w"]
        if got.dim():
            return [f"it returns shape {tuple(got.shape)}; return the loss as a 0-d tensor (shape ()), as the exercise "
                    "says: `.mean()` over the samples gives one, and `.squeeze()` turns a one-element tensor into one"]
        entropy = -(torch.log_softmax(logits, 1).exp() * torch.log_softmax(logits, 1)).sum(1)
        w = torch.softmax(-entropy, 0)
        known = [
            ("the weights favour the uncertain samples: w = softmax(−H), so confident samples weigh more",
             (entropy * scale * torch.softmax(entropy, 0)).mean()),
            ("the scale is missing: mean(H · scale · w), with scale the memory's capacity", (entropy * w).mean()),
            ("it sums over the samples; STAMP averages (mean(H · scale · w))", (entropy * scale * w).sum()),
            ("that is plain mean entropy (weighting 'none'); weight each sample by w = softmax(−H)", entropy.mean()),
            ("the weights are not normalised: w = softmax(−H) = exp(−H) / Σ exp(−H) sums to 1 over the samples",
             (entropy * scale * torch.exp(-entropy)).mean()),
        ]
        trials.append((Trial(got, expected.detach(), known), tuple(logits.shape), scale))
        answered.append((logits, scale, given, result, expected_grad))
    failing = next(((t, shape, scale) for t, shape, scale in trials if wrong(t)), None)
    if failing is not None:
        trial, shape, scale = failing
        shown, right = two_numbers(float(trial.got), float(trial.expected))
        return [reproduced([t for t, _, _ in trials])
                or f"on logits of shape {list(shape)} with scale {scale}: STAMP's loss is {right}, it gives {shown}"]
    for logits, scale, given, result, expected_grad in answered:
        if not isinstance(result, torch.Tensor) or not result.requires_grad:
            return ["the value is right but it carries no gradient: STAMP back-propagates this loss"]
        (grad,) = torch.autograd.grad(result, given)
        if not close(grad.double(), expected_grad, 1e-4):
            static = logits.clone().requires_grad_(True)
            lp = torch.log_softmax(static, 1)
            h = -(lp.exp() * lp).sum(1)
            (static_grad,) = torch.autograd.grad((h * scale * torch.softmax(-h, 0).detach()).mean(), static)
            if close(grad.double(), static_grad, 1e-4) and not close(static_grad, expected_grad, 1e-4):
                return ["the value is right but the weights are detached: STAMP's adaptive weights keep their gradient "
                        "(detaching them is the 'static' weighting of Fig. 3)"]
            return [f"the value is right but the gradient differs {largest_difference(grad.double(), expected_grad)}"]
    return []
