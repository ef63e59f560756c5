"""Lesson 15, *Outliers in the stream*: the OOD score, AUROC and the H-score; what outliers do
to entropy minimisation; filters, with the precision and recall of what they keep, read from
the methods' per-batch traces.

Exercises: AUROC from scores, the H-score from ACC and AUROC, a filter's precision and recall.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from sklearn.metrics import roc_curve

from stamplib.evaluation import metrics
from stamplib.evaluation.record import Record
from stamplib.evaluation.traces import filter_precision
from stamplib.experiments.course import LONG_STREAM, LONG_STREAM_CLOSED, OUTLIERS
from stamplib.experiments.plans import Plan
from stamplib.report.frames import plan_frame
from stamplib.report.paper import method_label
from stamplib.teaching.adapting import COLLAPSED_SHARE
from stamplib.teaching.exercises import (
    StudentRaised,
    Trial,
    exercise,
    integer,
    kind_of,
    near,
    reproduced,
    returned_number,
    two_numbers,
    uniform,
    wrong,
)
from stamplib.teaching.records import method_colours, per_batch, stream_outputs

LESSON = OUTLIERS.notebook

# ------------------------------------------------------------------------------- exercises


def auroc_percent(ood_score: torch.Tensor, is_outlier: torch.Tensor) -> float:
    """AUROC in percent of telling outliers (positive, ``is_outlier`` True) from known-class
    samples by ``ood_score`` (higher = more likely an outlier): the chance that a random outlier
    scores higher than a random known-class sample, a tie counting one half."""
    outliers, known = ood_score[is_outlier], ood_score[~is_outlier]
    higher = (outliers[:, None] > known[None, :]).double()
    ties = (outliers[:, None] == known[None, :]).double()
    return 100.0 * float((higher + 0.5 * ties).mean())


def _auroc_cases(generator: torch.Generator) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(scores, is_outlier): fixed boundary cases first — ties between the kinds in a coarse
    score, outliers all above and all below, every score equal (every pair a tie: AUROC 50) — then
    random ones, the later ones rounded (ties between the two kinds)."""
    flags = torch.tensor([True, False, True, False, False, True, False, False, True, False])
    yield torch.tensor([2.0, 1.0, 1.0, 1.0, 0.0, 2.0, 2.0, 0.0, 1.0, 1.0], dtype=torch.float64), flags
    yield flags.double() + 0.25 * torch.arange(10, dtype=torch.float64) / 10, flags
    yield -flags.double() + 0.25 * torch.arange(10, dtype=torch.float64) / 10, flags
    yield torch.full((10,), 0.7, dtype=torch.float64), flags
    # scores 2e-4 apart around 1: float32 keeps their order (it resolves 1.2e-7 there), float16
    # (9.8e-4 there) rounds neighbours together and turns wins into ties
    yield 1.0 + 2e-4 * torch.tensor([3, 0, 4, 1, 2, 6, 5, 7, 9, 8], dtype=torch.float64), flags
    for case in range(6):
        n = integer(generator, 10, 200)
        is_outlier = torch.rand(n, generator=generator) < uniform(generator, 0.15, 0.5)
        is_outlier[0], is_outlier[1] = True, False  # both kinds
        score = torch.randn(n, generator=generator, dtype=torch.float64) + 1.5 * is_outlier
        yield (score.round() if case >= 3 else score), is_outlier  # rounded: a coarse score, with ties


def _pair_share(score: torch.Tensor, is_outlier: torch.Tensor, tie: float) -> float:
    """Percent of (outlier, known) pairs in which the outlier scores higher, a tie counting ``tie``."""
    outliers, known = score[is_outlier][:, None], score[~is_outlier][None, :]
    return 100.0 * float(((outliers > known).double() + tie * (outliers == known).double()).mean())


def _scores_shown(score: torch.Tensor, is_outlier: torch.Tensor) -> str:
    """The case, as a message quotes it: every score when there are few, else their number."""
    if len(score) <= 12:
        return (f"scores {[round(float(v), 6) for v in score]} with is_outlier "
                f"{[int(v) for v in is_outlier.tolist()]}")
    return f"{len(score)} scores, {int(is_outlier.sum())} of them outliers"


@exercise(LESSON, "AUROC from OOD scores", auroc_percent, "`stamplib.evaluation.metrics.auroc` (scikit-learn's "
          "`roc_auc_score`)")
def _check_auroc(answer: Any, generator: torch.Generator) -> list[str]:
    trials, cases = [], []
    for score, is_outlier in _auroc_cases(generator):
        expected = metrics.auroc(score, is_outlier)
        got = returned_number(answer(score.clone(), is_outlier.clone()), "the AUROC in percent")
        known = [
            ("it is a fraction; the tables give AUROC in percent (× 100)", expected / 100.0),
            ("it is reversed: outliers are the positive class and a higher score means 'outlier'", 100.0 - expected),
            ("it is reversed and a fraction: outliers are positive (higher score = outlier), in percent",
             1.0 - expected / 100.0),
            ("a tie counts nothing in it: a tie between an outlier and a known-class sample counts one half "
             "(ties appear with coarse scores)", _pair_share(score, is_outlier, 0.0)),
            ("a tie counts as a whole win in it: a tie between an outlier and a known-class sample counts one half",
             _pair_share(score, is_outlier, 1.0)),
            ("it gives the AUROC of the scores rounded to float16 (half precision), which rounds scores 2e-4 apart "
             "to one value and makes ties of their pairs: keep the scores in float32 or float64",
             metrics.auroc(score.half().double(), is_outlier)),
        ]
        # float32 rounds a mean over 40 000 pairs to ~1e-5 %; one tie of 40 000 pairs is worth 1.25e-3 %
        trials.append(Trial(got, expected, known, 1e-6))
        cases.append((score, is_outlier))
    failing = next((i for i, t in enumerate(trials) if wrong(t)), None)
    if failing is None:
        return []
    if message := reproduced(trials):
        return [message]
    (score, is_outlier), trial = cases[failing], trials[failing]
    shown, right = two_numbers(trial.got, trial.expected)
    if bool((score == score[0]).all()):
        return [f"with every score equal (every pair a tie, so AUROC is 50) it gives {shown}"]
    ties = [_tied_pairs(s, o) for s, o in cases]
    # ties change the answer only if it is right wherever no outlier ties with a known-class sample
    # (then the first case it gets wrong has ties); an answer wrong without ties gets no note on them
    about_ties = all(not wrong(t) for t, n in zip(trials, ties) if not n)
    tied = (f" ({ties[failing]} of the {int(is_outlier.sum()) * int((~is_outlier).sum())} pairs here are ties "
            "between an outlier and a known-class sample: each counts one "
            "half)") if about_ties and ties[failing] else ""
    return [f"it gives {shown} where AUROC is {right}, on {_scores_shown(score, is_outlier)}{tied}"]


def _tied_pairs(score: torch.Tensor, is_outlier: torch.Tensor) -> int:
    """How many (outlier, known-class) pairs have equal scores."""
    return int((score[is_outlier][:, None] == score[~is_outlier][None, :]).sum())


def h_score(acc: float, auroc: float) -> float:
    """The H-score of the paper (Eq. 9): the harmonic mean of ACC and AUROC (both in percent);
    0 when both are 0."""
    if acc + auroc == 0:
        return 0.0
    return 2.0 * acc * auroc / (acc + auroc)


@exercise(LESSON, "The H-score from ACC and AUROC", h_score, "`stamplib.evaluation.metrics.h_score`")
def _check_h_score(answer: Any, generator: torch.Generator) -> list[str]:
    # boundary cases first: both 0, both 100, one of them 0, equal, far apart; then random ones
    pairs = [(0.0, 0.0), (100.0, 100.0), (90.0, 0.0), (40.0, 40.0), (99.0, 1.0)]
    pairs += [(uniform(generator, 0, 100), uniform(generator, 0, 100)) for _ in range(5)]
    pairs += [(uniform(generator, 50, 100), uniform(generator, 0, 5))]
    trials = []
    for acc, auc in pairs:
        expected = metrics.h_score(acc, auc)
        try:
            got = returned_number(answer(acc, auc), "the H-score in percent")
        except StudentRaised as raised:
            if isinstance(raised.error, ZeroDivisionError) and acc + auc == 0:
                return ["it raised ZeroDivisionError when ACC and AUROC are both 0: H is 0 there (nothing "
                        "recognised, nothing rejected)"]
            raise
        if acc + auc == 0:
            if not near(got, expected):
                return [f"it gives {got} when ACC and AUROC are both 0: H is 0 there"]
            continue
        known = [
            ("that is the arithmetic mean; H is the harmonic mean 2·ACC·AUROC / (ACC + AUROC), which a low "
             "value drags down", (acc + auc) / 2),
            ("that is the geometric mean; H is the harmonic mean 2·ACC·AUROC / (ACC + AUROC)", math.sqrt(acc * auc)),
            ("it misses the factor 2: H = 2·ACC·AUROC / (ACC + AUROC)", acc * auc / (acc + auc)),
            ("it is a fraction; ACC, AUROC and H are all in percent", expected / 100.0),
        ]
        trials.append((Trial(got, expected, known), acc, auc))
    failing = next(((t, acc, auc) for t, acc, auc in trials if wrong(t)), None)
    if failing is None:
        return []
    trial, acc, auc = failing
    shown, right = two_numbers(trial.got, trial.expected)
    return [reproduced([t for t, _, _ in trials]) or f"H({acc:.2f}, {auc:.2f}) is {right}; it gives {shown}"]


def filter_precision_recall(passed: torch.Tensor, is_outlier: torch.Tensor) -> tuple[float, float]:
    """Of the samples a filter let through (``passed``), the share that are known-class samples
    (precision), and of the known-class samples, the share it let through (recall), as fractions
    in [0, 1]. Precision is NaN only when nothing passed (0 / 0: nothing to judge); when only
    outliers passed it is 0, the worst a filter can do, not NaN: the batch's mean precision
    (lesson 15's table) must count that batch against the filter, not drop it. Recall is NaN
    when the batch has no known-class sample."""
    known = ~is_outlier
    kept_known = int((passed & known).sum())
    precision = kept_known / int(passed.sum()) if passed.any() else math.nan
    recall = kept_known / int(known.sum()) if known.any() else math.nan
    return precision, recall


def _trace_precision(passed: torch.Tensor, is_outlier: torch.Tensor) -> float:
    """Precision as the per-batch traces compute it (:func:`stamplib.evaluation.traces.filter_precision`)."""
    trace = {"n_passed": [int(passed.sum())], "passed_outliers": [int((passed & is_outlier).sum())]}
    return filter_precision(trace)[0]


def _filter_cases(generator: torch.Generator) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(passed, is_outlier): fixed boundary cases first — some of each kind through, nothing
    through, only outliers through (precision 0, not NaN), everything through, a batch without
    outliers — then random ones (the last with nothing through)."""
    is_outlier = torch.tensor([False, True, False, False, True, False, True, False, False, False])
    yield torch.tensor([True, True, False, True, False, False, True, True, False, False]), is_outlier
    yield torch.zeros(10, dtype=torch.bool), is_outlier
    yield is_outlier.clone(), is_outlier
    yield torch.ones(10, dtype=torch.bool), is_outlier
    yield torch.tensor([True, False, True, True, False, False, True, False]), torch.zeros(8, dtype=torch.bool)
    for case in range(6):
        b = integer(generator, 4, 64)
        is_outlier = torch.rand(b, generator=generator) < 0.3
        is_outlier[0] = False
        yield torch.rand(b, generator=generator) < (0.0 if case == 5 else uniform(generator, 0.1, 0.9)), is_outlier


@exercise(LESSON, "A filter's precision and recall", filter_precision_recall,
          "`stamplib.evaluation.traces.filter_precision` and the recall of the known-class samples")
def _check_precision_recall(answer: Any, generator: torch.Generator) -> list[str]:
    trials, cases = [], []
    special: list[str] = []  # per case, what the answer does on it when that is a boundary ("" when nothing)
    for passed, is_outlier in _filter_cases(generator):
        b = len(passed)
        expected_precision = _trace_precision(passed, is_outlier)
        known = ~is_outlier
        expected_recall = float((passed & known).sum()) / float(known.sum())
        result = answer(passed.clone(), is_outlier.clone())
        if not isinstance(result, tuple) or len(result) != 2:
            return [f"it returns {kind_of(result)}; return two numbers as a tuple, (precision, recall), as the "
                    "exercise says"]
        precision, recall = (returned_number(v, "precision and recall each") for v in result)
        kept_known, kept_outliers = float((passed & known).sum()), float((passed & is_outlier).sum())
        through = f"{int(passed.sum())} of {b} samples through, {int(is_outlier.sum())} outliers in the batch"
        if not passed.any() and not math.isnan(precision):
            special.append(f"nothing passed the filter ({through}), so its precision is undefined (nan), not "
                           f"{precision + 0.0}")
        elif passed.any() and not kept_known and math.isnan(precision):
            special.append(f"only outliers passed the filter here ({through}, none of them known-class) and it gives "
                           "precision nan: precision is 0 there (none of what passed is known-class); it is nan only "
                           "when nothing passed")
        else:
            special.append("")
        rejected = ~passed
        mistakes = [  # (what the answer does, the (precision, recall) it gives)
            ("its mask is inverted: it counts the samples the filter rejected (`~passed`) as those that passed; "
             "`passed` is True for the samples that went through",
             (_trace_precision(rejected, is_outlier), float((rejected & known).sum()) / float(known.sum()))),
            ("precision and recall are swapped: precision divides by what passed, recall by the known-class "
             "samples", (expected_recall, expected_precision)),
            ("give fractions in [0, 1], not percent", (100 * expected_precision, 100 * expected_recall)),
            ("give fractions in [0, 1], not percent", (100 * expected_precision, expected_recall)),
            ("give fractions in [0, 1], not percent", (expected_precision, 100 * expected_recall)),
            ("recall here is of the known-class samples (how many of them the filter keeps), not of the outliers",
             (expected_precision, kept_outliers / max(1, int(is_outlier.sum())))),
            ("precision divides by the samples that passed, not by the whole batch", (kept_known / b, expected_recall)),
            ("recall divides by the known-class samples (how many of them the filter keeps), not by the whole batch",
             (expected_precision, kept_known / b)),
            ("its precision is the outliers' share of what passed; precision is the known-class share",
             (1.0 - expected_precision, expected_recall)),
        ]
        trials.append(Trial((precision, recall), (expected_precision, expected_recall), mistakes))
        cases.append(through)
    failing = next((i for i, t in enumerate(trials) if wrong(t)), None)
    if failing is None:
        return _no_known_class_problem(answer)
    if message := reproduced(trials):
        return [message]
    if special[failing]:  # said only of the first case the answer gets wrong
        return [special[failing]]
    trial = trials[failing]
    differs = []
    for what, value, right in zip(("precision", "recall"), trial.got, trial.expected):
        if not near(value, right):
            shown, correct = two_numbers(value, right)
            differs.append(f"{what} {shown} (expected {correct})")
    return [f"{', '.join(differs)}, with {cases[failing]}"]


def _no_known_class_problem(answer: Any) -> list[str]:
    """A batch of outliers only, some through: its recall is undefined (nan, 0 / 0), as the exercise
    says. Tried last, once every other case is right, so that an answer that divides by zero there
    is told about this batch, not about another mistake (issue 83: the lesson did not say it)."""
    passed, is_outlier = torch.tensor([True, False, True, False]), torch.ones(4, dtype=torch.bool)
    case = "a batch of 4 outliers and no known-class sample, 2 of them through"
    try:
        result = answer(passed, is_outlier)
    except StudentRaised as raised:
        return [f"on {case} it raised {type(raised.error).__name__}: {raised.error}; recall is undefined there "
                "(nan: no known-class sample to keep), as precision is when nothing passed"]
    recall = returned_number(result[1], "precision and recall each") if isinstance(result, tuple) and \
        len(result) == 2 else None
    if recall is None or math.isnan(recall):
        return []
    return [f"on {case} it gives recall {recall + 0.0}: recall is undefined there (nan: no known-class sample to "
            "keep), as precision is when nothing passed"]


# ------------------------------------------------------------------------------- the lesson


def table(plan: Plan, records: Mapping[str, Record]) -> pd.DataFrame:
    """ACC, AUROC and H (mean over corruptions) per method and stream of the plan."""
    frame = plan_frame(plan, records)
    if frame.empty:
        return frame
    frame = frame.assign(Method=frame["method"].map(method_label),
                         stream=frame["variant"].replace("", "paper's stream"))
    return frame[["Method", "method", "stream", "acc", "auroc", "h", "collapsed"]].reset_index(drop=True)


def _cell_record(plan: Plan, records: Mapping[str, Record], method: str, variant: str = "") -> dict[str, Any] | None:
    for cell in plan.cells:
        if cell.spec.method == method and cell.variant == variant:
            return records.get(cell.spec.key())
    return None


def plot_scores(plan: Plan, records: Mapping[str, Record], results: str | Path,
                methods: tuple[str, ...] = ("bn_stats", "tent", "stamp")) -> plt.Figure:
    """Histograms of the OOD score of known-class samples and outliers, one row per method and
    one column per corruption, AUROC in each title; the last column: the ROC curves of the
    first corruption."""
    chosen = [(m, r) for m in methods if (r := _cell_record(plan, records, m)) is not None]
    corruptions = chosen[0][1].corruptions if chosen else []
    fig, axes = plt.subplots(max(1, len(chosen)), len(corruptions) + 1, squeeze=False,
                             figsize=(3.3 * (len(corruptions) + 1), 2.4 * max(1, len(chosen))))
    colours = method_colours([method_label(m) for m, _ in chosen])
    for row, (method, record) in zip(axes, chosen):
        outputs = stream_outputs(record, results)
        for ax, corruption in zip(row, corruptions):
            out = outputs[corruption]
            outlier = out.label < 0
            bins = np.linspace(float(out.ood_score.min()), float(out.ood_score.max()) + 1e-9, 30)
            ax.hist(out.ood_score[~outlier], bins=bins, density=True, alpha=0.6, label="known classes")
            ax.hist(out.ood_score[outlier], bins=bins, density=True, alpha=0.6, label="outliers")
            auc = record.per_corruption[corruption].auroc
            ax.set_title(f"{method_label(method)}, {corruption.replace('_', ' ')}: AUROC {auc:.1f}", fontsize=10)
            ax.tick_params(labelsize=9)
        row[0].set_ylabel("density")
        first = outputs[corruptions[0]]
        fpr, tpr, _ = roc_curve(first.label < 0, first.ood_score)
        row[-1].plot(100 * fpr, 100 * tpr, color=colours[method_label(method)])
        row[-1].plot([0, 100], [0, 100], color="grey", linewidth=0.8, linestyle="--")
        # each row's ROC is its method's: the title says whose (three panels titled alike named none)
        row[-1].set(title=f"{method_label(method)}: ROC, {corruptions[0].replace('_', ' ')}",
                    xlabel="FPR: known classes flagged (%)", ylabel="TPR: outliers flagged (%)")
        row[-1].title.set_fontsize(10)
    for ax in axes[-1][:-1]:
        ax.set_xlabel("OOD score (entropy, nats)")
    # one legend for the figure, above it: inside an axis it would cover bars
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False, fontsize=10)
    fig.tight_layout()
    return fig


def plot_h_plane(frame: pd.DataFrame) -> plt.Figure:
    """Every method of the paper's stream as a point (mean ACC, mean AUROC) over curves of equal
    H: the harmonic mean is only high where both are."""
    rows = frame[frame["stream"] == "paper's stream"]
    fig, ax = plt.subplots(figsize=(7.6, 5.0))
    grid = np.linspace(1, 100, 200)
    acc, auc = np.meshgrid(grid, grid)
    contours = ax.contour(acc, auc, 2 * acc * auc / (acc + auc), levels=range(10, 100, 10), colors="grey",
                          linewidths=0.6)
    ax.clabel(contours, fmt="H=%d", fontsize=8)
    colours = method_colours(rows["Method"])
    # a legend, not labels beside the points; methods with close scores (BN Stats and EATA) land on one
    # spot, so each has its own marker and the first drawn is the largest: every point stays visible
    ordered = rows.sort_values("h", ascending=False).reset_index(drop=True)
    markers = "oDs^vP*Xh<>p"
    for i, r in ordered.iterrows():
        ax.scatter(r["acc"], r["auroc"], color=colours[r["Method"]], s=max(36.0, 360 * 0.72**i), zorder=3 + i,
                   edgecolor="black", linewidth=0.7, marker=markers[i % len(markers)],
                   label=f"{r['Method']} (H {r['h']:.1f})")
    ax.set(xlabel="ACC (%)", ylabel="AUROC (%)", xlim=(0, 100), ylim=(0, 100),
           title="Each method's ACC and AUROC, over lines of equal H")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=9, title="by H", markerscale=0.7)
    fig.tight_layout()
    return fig


def h_plane_text(plan: Plan, records: Mapping[str, Record]) -> str:
    """Who has the highest mean H on the paper's stream, and where STAMP stands against it and
    against BN Stats, with the corruption that makes the difference (each word of direction
    read from the records)."""
    frame = plan_frame(plan, records, per_corruption=True)
    frame = frame[frame["variant"] == ""] if not frame.empty else frame
    if frame.empty:
        return "The paper's-stream records are missing: compute the cells first."
    h = frame.pivot_table(index="method", columns="corruption", values="h", sort=False)
    means = h["mean"].sort_values(ascending=False)
    best = method_label(means.index[0])
    text = f"On this stream the highest mean H is {best}{chr(39) if best.endswith('s') else chr(39) + 's'} " \
           f"({means.iloc[0]:.1f})"
    if "stamp" not in h.index or "bn_stats" not in h.index:
        return text + "."
    shown = means.round(1)
    ties = [(a, b) for a, b in zip(means.index[:-1], means.index[1:]) if shown[a] == shown[b]]
    if ties:
        text += "; " + "; ".join(f"{method_label(a)} and {method_label(b)} tie at {shown[a]:.1f} to one decimal "
                                 f"({means[a]:.2f} and {means[b]:.2f}: the figure draws the first larger, so both "
                                 "show)" for a, b in ties)
    stamp, bn = h.loc["stamp"], h.loc["bn_stats"]
    stream_order = next(r.corruptions for c in plan.cells if (r := records.get(c.spec.key())) is not None)
    corruptions = [c for c in stream_order if c in h.columns]
    side = "above" if stamp["mean"] > bn["mean"] else "below"
    text += f"; STAMP's mean H ({stamp['mean']:.1f}) is {side} BN Stats' " \
            f"({bn['mean']:.1f}). Per corruption, STAMP against BN Stats: " + ", ".join(
                f"{c.replace('_', ' ')} {stamp[c]:.1f} vs {bn[c]:.1f}" for c in corruptions) + "."
    worst = min(corruptions, key=lambda c: stamp[c] - bn[c])
    if stamp["mean"] < bn["mean"]:
        text += (f" The mean is pulled down by {worst.replace('_', ' ')}, where STAMP is "
                 f"{bn[worst] - stamp[worst]:.1f} points below BN Stats: on this benchmark, unlike the paper's, STAMP "
                 f"does "
                 "not lead on the mean, and lesson 17 takes that corruption apart.")
    return text


def outliers_text(frame: pd.DataFrame) -> str:
    """What outliers do to Tent, in numbers: ACC with and without outliers against BN Stats,
    and the AUROC it gives up."""
    def value(method: str, stream: str, metric: str) -> float:
        rows = frame[(frame["method"] == method) & (frame["stream"] == stream)]
        return float(rows[metric].iloc[0]) if not rows.empty else math.nan

    paper, closed = "paper's stream", "closed set"
    numbers = {(m, s, k): value(m, s, k) for m in ("bn_stats", "tent") for s in (paper, closed) for k in ("acc",
                                                                                                          "auroc")}
    if any(math.isnan(numbers[(m, s, "acc")]) for m in ("bn_stats", "tent") for s in (paper, closed)):
        return "Some records are missing: compute the cells first."
    gain_closed = numbers[("tent", closed, "acc")] - numbers[("bn_stats", closed, "acc")]
    gain_open = numbers[("tent", paper, "acc")] - numbers[("bn_stats", paper, "acc")]
    return (f"Without outliers Tent changes BN Stats' accuracy by {gain_closed:+.1f} points "
            f"({numbers[('bn_stats', closed, 'acc')]:.1f} → {numbers[('tent', closed, 'acc')]:.1f} %); with 20 % "
            f"outliers in the same stream by {gain_open:+.1f} ({numbers[('bn_stats', paper, 'acc')]:.1f} → "
            f"{numbers[('tent', paper, 'acc')]:.1f} %), and its AUROC goes from BN Stats' "
            f"{numbers[('bn_stats', paper, 'auroc')]:.1f} to {numbers[('tent', paper, 'auroc')]:.1f}" + (
                ": minimising the entropy of every sample makes the outliers confident too, so the entropy stops "
                "telling them apart." if numbers[("tent", paper, "auroc")] < numbers[("bn_stats", paper, "auroc")]
                else "."))


def long_stream_scores(plan: Plan, records: Mapping[str, Record], results: str | Path) -> pd.DataFrame:
    """Per batch of the long stream with outliers, for BN Stats and Tent: the mean OOD score
    (entropy) of known-class samples and of outliers (:func:`~stamplib.teaching.records.per_batch`)."""
    parts = []
    for method in ("bn_stats", "tent"):
        record = _cell_record(plan, records, method, LONG_STREAM)
        if record is not None:
            parts.append(per_batch(record, results).assign(Method=method_label(method)))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def plot_long_stream_scores(frame: pd.DataFrame) -> plt.Figure:
    """Mean entropy per batch of known-class samples (solid) and outliers (dotted) along the long
    stream, per method."""
    fig, ax = plt.subplots(figsize=(12, 4.2))
    colours = method_colours(frame["Method"]) if not frame.empty else {}
    for method, rows in frame.groupby("Method", sort=False):
        ax.plot(rows["batch"], rows["score_known"], color=colours[method], label=f"{method}: known classes")
        ax.plot(rows["batch"], rows["score_outliers"], color=colours[method], linestyle=":",
                label=f"{method}: outliers")
    spans = frame.groupby("corruption", sort=False)["batch"].agg(["min", "max"]) if not frame.empty else pd.DataFrame()
    ax.grid(False, axis="x")  # the theme's grid would fall mid-corruption, under the names
    for start in spans["min"] if not spans.empty else ():
        ax.axvline(start - 0.5, color="0.6", linewidth=0.8)
    # each corruption's name under the middle of its batches, as the x axis' labels
    ax.set_xticks(list((spans["min"] + spans["max"]) / 2) if not spans.empty else [],
                  [c.replace("_", " ") for c in spans.index], rotation=45, ha="right", fontsize=9)
    lengths = set(spans["max"] - spans["min"] + 1) if not spans.empty else set()
    each = f"; {lengths.pop()} batches each" if len(lengths) == 1 else ""
    ax.set(xlabel=f"the long stream's corruptions in turn (a grey line where one begins{each})",
           ylabel="mean OOD score (entropy, nats)", title="The OOD score along the long stream")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=9)
    fig.tight_layout()
    return fig


def long_stream_text(frame: pd.DataFrame, shares: pd.DataFrame) -> str:
    """Tent's outliers along the long stream: their entropy against the known classes', and
    the share predicted as one class (``shares``: :func:`stamplib.teaching.adapting.long_stream`)."""
    tent = frame[frame["Method"] == method_label("tent")] if not frame.empty else frame
    tent_shares = shares[(shares["Method"] == method_label("tent")) & (shares["stream"] == LONG_STREAM)] \
        if not shares.empty else shares
    closed = shares[(shares["Method"] == method_label("tent")) & (shares["stream"] == LONG_STREAM_CLOSED)] \
        if not shares.empty else shares
    if tent.empty or tent_shares.empty or closed.empty:
        return "The long-stream records are missing: compute the cells first."
    later = tent[tent["score_outliers"] < tent["score_known"]]
    flips = (f"first at batch {int(later['batch'].iloc[0])}, then in {len(later)} of its {len(tent)} batches"
             if not later.empty else f"in none of its {len(tent)} batches")
    last = tent_shares.iloc[-1]
    closed_top = 100 * closed["top_class_share"].max()
    text = (f"On the long stream Tent's outliers are more confident than its known-class samples {flips}; on the "
            f"last corruption {100 * last['outliers_top_share']:.0f} % of the outliers are predicted as one class, "
            f"and the most predicted class takes {100 * last['top_class_share']:.0f} % of the known-class "
            f"predictions. Without outliers (dashed) that share stays at {100 * closed['top_class_share'].min():.0f}–"
            f"{closed_top:.0f} %")
    # the same words as lesson 14's verdict on this stream (adapting.drift_verdict): "collapses" only
    # where one class takes half the predictions or more
    if 100 * last["top_class_share"] > closed_top + 5:
        if last["top_class_share"] >= COLLAPSED_SHARE:
            return text + ": with outliers, the entropy minimisation collapses onto one class."
        return (text + ": the outliers pull the entropy minimisation towards one class (it drifts, without "
                f"collapsing: no class takes {100 * COLLAPSED_SHARE:.0f} % of the predictions).")
    return text + "."


def filter_frame(plan: Plan, records: Mapping[str, Record], results: str | Path) -> pd.DataFrame:
    """One row per (filtering method, corruption, batch) of the paper's stream: samples through
    the filter, known-class samples in the batch, precision and recall of what passed."""
    rows = []
    for cell in plan.cells:
        record = records.get(cell.spec.key())
        if cell.variant or record is None or not record.trace:
            continue
        outputs = stream_outputs(record, results)
        batch_size = record.spec.stream.batch_size
        for corruption in [c for c in record.corruptions if c in record.trace]:
            trace = record.trace[corruption]
            if trace.n_passed is None:
                continue
            labels = outputs[corruption].label
            for i, (n, outliers) in enumerate(zip(trace.n_passed, trace.passed_outliers)):
                known = int((labels[i * batch_size:(i + 1) * batch_size] >= 0).sum())
                rows.append({"Method": method_label(cell.spec.method), "corruption": corruption, "batch": i,
                             "passed": n, "known": known,
                             "precision": math.nan if not n else 1.0 - outliers / n,
                             "recall": (n - outliers) / known if known else math.nan})
    return pd.DataFrame(rows)


def filter_summary(frame: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """Per method: samples through the filter per batch, precision and recall (percent, means
    over batches), and the method's ACC, AUROC and H on the paper's stream (``scores``:
    :func:`table`)."""
    if frame.empty:
        return frame
    out = frame.groupby("Method", sort=False).agg(**{"passed per batch": ("passed", "mean"),
                                                     "precision (%)": ("precision", "mean"),
                                                     "recall (%)": ("recall", "mean")}).reset_index()
    out[["precision (%)", "recall (%)"]] *= 100.0
    paper = scores[scores["stream"] == "paper's stream"].set_index("Method")[["acc", "auroc", "h"]]
    return out.join(paper.rename(columns=str.upper), on="Method")


def plot_filters(frame: pd.DataFrame) -> plt.Figure:
    """Per corruption: precision against recall of each filtering method, one point per batch
    and a large one for the mean."""
    corruptions = list(dict.fromkeys(frame["corruption"])) if not frame.empty else []
    fig, axes = plt.subplots(1, max(1, len(corruptions)), figsize=(4.4 * max(1, len(corruptions)), 4.2),
                             squeeze=False, sharey=True)
    colours = method_colours(frame["Method"]) if not frame.empty else {}
    for ax, corruption in zip(axes[0], corruptions):
        rows = frame[frame["corruption"] == corruption]
        for method, mine in rows.groupby("Method", sort=False):
            ax.scatter(100 * mine["recall"], 100 * mine["precision"], s=8, alpha=0.35, color=colours[method])
            ax.scatter(100 * mine["recall"].mean(), 100 * mine["precision"].mean(), s=70, color=colours[method],
                       edgecolor="black", zorder=3)
        # precision is undefined where nothing passed: such a method has no point here, so the title
        # says so (a note inside the axis would cover points)
        empty = [m for m, mine in rows.groupby("Method", sort=False) if not mine["passed"].any()]
        title = corruption.replace("_", " ") + (f"\n(no sample passed: {', '.join(empty)})" if empty else "")
        ax.set(title=title, xlim=(-3, 103))
    # one x-label under all the panels: the same long label under each ran into its neighbour's
    fig.supxlabel("recall: known-class samples kept (%)", fontsize=10)
    axes[0][0].set_ylabel("precision (%): known-class\nshare of what passed")
    if corruptions:
        handles = [plt.Line2D([], [], marker="o", linestyle="", markersize=8, color=colours[m], markeredgecolor="black",
                              label=m) for m in colours]
        handles += [plt.Line2D([], [], marker="o", linestyle="", markersize=3, alpha=0.5, color="grey",
                               label="small: one batch"),
                    plt.Line2D([], [], marker="o", linestyle="", markersize=8, color="grey", markeredgecolor="black",
                               label="large: mean over batches")]
        axes[0][-1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.suptitle("What each filter keeps, batch by batch")
    fig.tight_layout()
    return fig
