"""Lesson 14, *Adapting at test time*: Source, BN Stats and Tent on one stream, why re-estimated
BatchNorm statistics help, entropy minimisation, and what it does on a long stream.

Exercises: the entropy of a softmax, the entropy from logits (Tent's loss, stably), and BatchNorm
with the batch's own statistics. Figures and sentences are computed from the lesson's records
(:mod:`stamplib.experiments.course`, :func:`~stamplib.experiments.course.plan_adapting`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter
from torch import nn

from stamplib.blocks.bn import BatchStatsNorm2d
from stamplib.blocks.entropy import exact_prob_entropy, logit_entropy
from stamplib.data.streams import Stream
from stamplib.evaluation.assembly import build_stream
from stamplib.evaluation.metrics import METRIC_LABELS
from stamplib.evaluation.record import Record
from stamplib.experiments.course import ADAPTING, LONG_STREAM, LONG_STREAM_CLOSED
from stamplib.experiments.plans import Plan
from stamplib.models import source_model
from stamplib.paths import RunContext
from stamplib.report.frames import plan_frame
from stamplib.report.paper import method_label
from stamplib.teaching.exercises import (
    TOLERANCE,
    Trial,
    close,
    exercise,
    integer,
    largest_difference,
    reproduced,
    returned_tensor,
    shape_problem,
    two_numbers,
    uniform,
    wrong,
)
from stamplib.teaching.records import method_colours, per_corruption_shares

LESSON = ADAPTING.notebook

# ------------------------------------------------------------------------------- exercises


def batch_norm_with_batch_statistics(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                                     eps: float = 1e-5) -> torch.Tensor:
    """BatchNorm of ``x`` ([N, C, H, W]) with the batch's own statistics: per channel, the mean
    and the biased variance over the batch and the spatial positions, then ``weight`` and
    ``bias`` per channel."""
    mean = x.mean(dim=(0, 2, 3), keepdim=True)
    variance = x.var(dim=(0, 2, 3), unbiased=False, keepdim=True)
    normalised = (x - mean) / torch.sqrt(variance + eps)
    return normalised * weight.view(1, -1, 1, 1) + bias.view(1, -1, 1, 1)


def _batch_norm_cases(generator: torch.Generator) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]]:
    """(x, weight, bias, eps): two fixed boundary cases — a batch of two with a large ε and
    channels of small variance (where ε, its place and n − 1 matter most), then channels far
    apart in mean and scale — and five random ones."""
    fixed = torch.Generator().manual_seed(52)
    for n, c, h, spread, eps in ((2, 3, 2, 0.1, 0.1), (4, 5, 3, 3.0, 1e-5)):
        x = (torch.randn(n, c, h, h, generator=fixed,
                         dtype=torch.float64) * spread * torch.arange(1, c + 1).view(1, c, 1, 1)
             + torch.arange(c, dtype=torch.float64).view(1, c, 1, 1) * 2)
        yield x, torch.linspace(0.5, 2.0, c, dtype=torch.float64), torch.linspace(-1.0, 1.0, c,
                                                                                  dtype=torch.float64), eps
    for _ in range(5):
        n, c, h = integer(generator, 2, 16), integer(generator, 1, 16), integer(generator, 1, 8)
        x = (torch.randn(n, c, h, h, generator=generator, dtype=torch.float64) * uniform(generator, 0.5, 4)
             + torch.randn(1, c, 1, 1, generator=generator, dtype=torch.float64) * 3)
        yield (x, torch.rand(c, generator=generator, dtype=torch.float64) + 0.5,
               torch.randn(c, generator=generator, dtype=torch.float64), 10 ** uniform(generator, -5, -1))


#: Float32's unit roundoff: the relative error of rounding one number to float32.
FLOAT32_ROUNDOFF = 2.0 ** -24


def float32_batch_norm_tolerance(x: torch.Tensor, weight: torch.Tensor, eps: float,
                                 expected: torch.Tensor) -> torch.Tensor:
    """Per element, how far a right BatchNorm computed in float32 may land from the float64
    result on these inputs: the inputs' own rounding (u·|x| / σ), and the variance's, which
    a one-pass E[x²] − μ² loses to cancellation in proportion to E[x²] / σ² (a sum of float32
    terms rounds to a few u of its size; 16 u leaves room for any summation order)."""
    dims = (0, 2, 3)
    variance = x.var(dims, unbiased=False, keepdim=True)
    sigma = torch.sqrt(variance + eps)
    second_moment = (x * x).mean(dims, keepdim=True)
    normalised = (x - x.mean(dims, keepdim=True)) / sigma
    u = FLOAT32_ROUNDOFF
    w = weight.abs().view(1, -1, 1, 1)
    from_inputs = 4 * u * x.abs().amax(dims, keepdim=True) / sigma
    from_variance = normalised.abs() * 16 * u * second_moment / (2 * sigma**2)
    return TOLERANCE * max(1.0, float(expected.abs().max())) + w * (from_inputs + from_variance)


def _where(got: torch.Tensor, expected: torch.Tensor, what: str) -> str:
    """Where ``got`` is farthest from ``expected``: the index, the expected value, what it gave."""
    index = tuple(int(i) for i in torch.unravel_index((got - expected).abs().nan_to_num(float("inf")).argmax(),
                                                       got.shape))
    shown, right = two_numbers(float(got[index]), float(expected[index]))
    return f"{what}: at {list(index)} expected {right}, got {shown}"


@exercise(LESSON, "BatchNorm with the batch's statistics (BN Stats)", batch_norm_with_batch_statistics,
          "`stamplib.blocks.bn.BatchStatsNorm2d` (the layer every adapting method uses)")
def _check_batch_norm(answer: Any, generator: torch.Generator) -> list[str]:
    trials = []
    for x, weight, bias, eps in _batch_norm_cases(generator):
        c = x.shape[1]
        layer = BatchStatsNorm2d(c, eps=eps).double()
        with torch.no_grad():
            layer.weight.copy_(weight)
            layer.bias.copy_(bias)
            expected = layer(x)
        got = returned_tensor(answer(x.clone(), weight.clone(), bias.clone(), eps), "a tensor shaped like x")
        if problem := shape_problem(got, expected, "BatchNorm returns a tensor shaped like its input"):
            return [problem]
        w, b = weight.view(1, -1, 1, 1), bias.view(1, -1, 1, 1)
        dims = (0, 2, 3)
        mean, var = x.mean(dims, keepdim=True), x.var(dims, unbiased=False, keepdim=True)
        known = [
            ("it uses the unbiased variance (÷ n − 1); BatchNorm normalises with the biased one (÷ n, n = N·H·W)",
             (x - mean) / torch.sqrt(x.var(dims, keepdim=True) + eps) * w + b),
            ("eps belongs inside the square root: (x − μ) / √(σ² + ε)", (x - mean) / (var.sqrt() + eps) * w + b),
            ("it normalises but then forgets weight and bias (scale by weight, shift by bias, per channel)",
             (x - mean) / torch.sqrt(var + eps)),
            ("weight and bias are swapped: weight scales, bias shifts", (x - mean) / torch.sqrt(var + eps) * b + w),
            ("its statistics are per sample; BatchNorm's are per channel over the batch and the positions "
             "(dims 0, 2, 3)",
             (x - x.mean((1, 2, 3), keepdim=True)) / torch.sqrt(x.var((1, 2, 3), unbiased=False, keepdim=True) + eps)
             * w + b),
            ("its statistics are per sample and channel (instance norm, dims 2, 3); BatchNorm's are per channel "
             "over the batch too (dims 0, 2, 3)",
             (x - x.mean((2, 3), keepdim=True)) / torch.sqrt(x.var((2, 3), unbiased=False, keepdim=True) + eps)
             * w + b),
            ("its statistics leave the spatial positions out; BatchNorm averages over them too (dims 0, 2, 3)",
             (x - x.mean(0, keepdim=True)) / torch.sqrt(x.var(0, unbiased=False, keepdim=True) + eps) * w + b),
            ("it uses ε = 1e-5 whatever `eps` it is given: pass `eps` on", (x - mean) / torch.sqrt(var + 1e-5) * w + b),
        ]
        trials.append((Trial(got, expected, known, float32_batch_norm_tolerance(x, weight, eps, expected)),
                       tuple(x.shape), eps))
    failing = next(((t, shape, eps) for t, shape, eps in trials if wrong(t)), None)
    if failing is None:
        return []
    trial, shape, eps = failing
    return [reproduced([t for t, _, _ in trials])
            or _where(trial.got, trial.expected, f"it differs from BatchNorm's output on x of shape {list(shape)} "
                                                 f"with eps = {eps:g}")]


def softmax_entropy(probs: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of each row of ``probs`` ([B, C], each row sums to 1) → [B]."""
    # xlogy(p, p) = p·log p, and 0 where p = 0 (the limit of p·log p), where p * log(p) gives nan
    return -torch.special.xlogy(probs, probs).sum(dim=1)


def _fixed_probs() -> list[torch.Tensor]:
    """Boundary rows: uniform (H = ln C), one-hot (H = 0) and half-and-half with exact zeros, for
    C = 10 and 100 (and never as many rows as classes, so a sum over the wrong dim shows)."""
    cases = []
    for c in (10, 100):
        half = torch.zeros(c, dtype=torch.float64)
        half[:2] = 0.5
        cases.append(torch.stack([torch.full((c,), 1.0 / c, dtype=torch.float64),
                                  torch.nn.functional.one_hot(torch.tensor(c - 1), c).double(), half]))
    return cases


def _random_probs(generator: torch.Generator, with_zeros: bool) -> torch.Tensor:
    b, c = integer(generator, 1, 64), integer(generator, 2, 100)
    probs = torch.softmax(torch.randn(b, c, generator=generator, dtype=torch.float64) * uniform(generator, 0.1, 6), 1)
    if with_zeros:  # one-hot rows: a confident prediction, with exact zeros
        rows = torch.randint(b, (max(1, b // 4),), generator=generator)
        probs[rows] = torch.nn.functional.one_hot(torch.randint(c, (len(rows),), generator=generator), c).double()
    return probs


def _entropy_shape_problem(got: torch.Tensor, expected: torch.Tensor, probs: torch.Tensor) -> str | None:
    """What an answer of another shape than one entropy per row returned, said only as far as the
    check computed it (a sum over the batch, the first row alone), else its shape (issue 83: an
    answer that returned row 0 only was told it reduced over the batch)."""
    if got.shape == expected.shape:
        return None
    terms = -torch.special.xlogy(probs, probs)
    hint = f"return one entropy per row, shape {tuple(expected.shape)}: sum −p·log p over the classes (dim=1) only"
    if got.shape == terms.shape[1:] and close(got, terms.sum(dim=0)):
        return f"it sums −p·log p over the batch (dim=0), one value per class, shape {tuple(got.shape)}; {hint}"
    if got.numel() == 1 and close(got.reshape(()), expected[0]):
        return f"it returns the entropy of the first row only (shape {tuple(got.shape)}); {hint}"
    if got.shape == terms.shape[1:] and close(got, terms[0]):
        return (f"it returns the first row's terms −p·log p, not summed (shape {tuple(got.shape)}); {hint}, for "
                "every row")
    if got.numel() == 1 and close(got.reshape(()), expected.sum()):
        return f"it returns one number, the entropies summed over the batch; {hint}"
    if got.numel() == 1 and close(got.reshape(()), expected.mean()):
        return f"it returns one number, the mean entropy over the batch; {hint}"
    return f"it returns shape {tuple(got.shape)} for probs of shape {tuple(probs.shape)}; {hint}"


@exercise(LESSON, "The entropy of a softmax", softmax_entropy, "`stamplib.blocks.entropy.exact_prob_entropy`")
def _check_softmax_entropy(answer: Any, generator: torch.Generator) -> list[str]:
    trials = []
    for probs in [*_fixed_probs(), *(_random_probs(generator, with_zeros=case >= 3) for case in range(6))]:
        expected = exact_prob_entropy(probs)
        got = returned_tensor(answer(probs.clone()), "a tensor of shape [B], one entropy per row")
        if problem := _entropy_shape_problem(got, expected, probs):
            return [problem]
        nan_rows = got.isnan() & ~expected.isnan()
        if nan_rows.any() and any(wrong(t) for t, _ in trials):
            break  # wrong on an earlier case already: the message is that case's
        if nan_rows.any():
            if bool((probs[nan_rows] == 0).any(dim=1).all()):
                return ["it gives nan for rows with a probability of exactly 0 (and only for those): 0·log 0 is nan "
                        "in floating point, but its limit is 0 (torch.special.xlogy(p, p) computes p·log p with "
                        "that limit)"]
            return [f"it gives nan for {int(nan_rows.sum())} of {len(got)} rows (row {int(nan_rows.nonzero()[0])} "
                    "first), where the entropy is a number"]
        c = probs.shape[1]
        known = [
            ("it is in bits (log base 2); entropy here is in nats (the natural log), so its maximum is ln C",
             expected / math.log(2)),
            ("it is in log base 10; entropy here is in nats (the natural log), so its maximum is ln C",
             expected / math.log(10)),
            ("it divides by ln C (the normalised entropy, at most 1); the entropy here is in nats, not divided",
             expected / math.log(c)),
            ("the sign: H = −Σ p·log p is never negative", -expected),
            ("it averages over the classes; the entropy sums −p·log p over them", expected / c),
        ]
        trials.append((Trial(got, expected, known), probs.shape))
    failing = next(((t, shape) for t, shape in trials if wrong(t)), None)
    if failing is None:
        return []
    trial, shape = failing
    return [reproduced([t for t, _ in trials])
            or _where(trial.got, trial.expected, f"on probs of shape {list(shape)}, the entropy of each row")]


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of softmax(``logits``) for each row of ``logits`` ([B, C]) → [B], with
    its gradient (Tent minimises its mean)."""
    log_p = torch.log_softmax(logits, dim=1)  # stable: softmax then log underflows to log(0) = −inf
    return -(log_p.exp() * log_p).sum(dim=1)


@exercise(LESSON, "Entropy from logits, stably (Tent's loss)", entropy_from_logits,
          "`stamplib.blocks.entropy.logit_entropy`")
def _check_entropy_from_logits(answer: Any, generator: torch.Generator) -> list[str]:
    fixed = [torch.zeros(3, 10, dtype=torch.float64),  # equal logits: H = ln C
             torch.tensor([[1000.0, 0.0, -1000.0], [0.0, 0.0, 800.0]], dtype=torch.float64)]  # one-hot softmax
    randoms = []
    for case in range(6):
        b, c = integer(generator, 1, 64), integer(generator, 2, 100)
        scale = 200.0 if case >= 3 else uniform(generator, 0.1, 5)  # large logits: a confident network
        randoms.append(torch.randn(b, c, generator=generator, dtype=torch.float64) * scale)
    trials, answered = [], []
    for logits in [*fixed, *randoms]:
        expected = logit_entropy(logits)
        given = logits.clone().requires_grad_(True)
        result = answer(given)
        got = returned_tensor(result, "a tensor of shape [B], one entropy per row")
        if problem := shape_problem(got, expected, "one entropy per sample, summed over the classes (dim=1)"):
            return [problem]
        nan_rows = got.isnan() & ~expected.isnan()
        if nan_rows.any() and any(wrong(t) for t, _ in trials):
            break  # wrong on an earlier case already: the message is that case's
        if nan_rows.any():
            naive = -(torch.softmax(logits, 1) * torch.log(torch.softmax(logits, 1))).sum(1)
            if torch.equal(naive.isnan(), nan_rows):
                return ["it gives nan for large logits, on exactly the rows where softmax rounds a probability to 0 "
                        "and log(0) = −inf: take log_softmax (torch.log_softmax) and p = exp(log p)"]
            return [f"it gives nan for {int(nan_rows.sum())} of {len(got)} rows, where the entropy is a number"]
        # float32 computes log_softmax of logits in the hundreds to ~1e-7 of their size
        tolerance = TOLERANCE * max(1.0, float(logits.abs().max()) / 10)
        known = [("it is in bits (log base 2); use the natural log", expected / math.log(2)),
                 ("the sign: H = −Σ p·log p is never negative", -expected)]
        trials.append((Trial(got, expected, known, tolerance), logits.shape))
        answered.append((logits, given, result))
    failing = next(((t, shape) for t, shape in trials if wrong(t)), None)
    if failing is not None:
        trial, shape = failing
        return [reproduced([t for t, _ in trials])
                or _where(trial.got, trial.expected, f"on logits of shape {list(shape)}, the entropy of each row")]
    for logits, given, result in answered:
        if not isinstance(result, torch.Tensor) or not result.requires_grad:
            return ["the value is right but it carries no gradient (computed without autograd, or detached): "
                    "Tent back-propagates this entropy into the BatchNorm parameters"]
        (grad,) = torch.autograd.grad(result.sum(), given)
        reference = logits.clone().requires_grad_(True)
        (expected_grad,) = torch.autograd.grad(logit_entropy(reference).sum(), reference)
        if not close(grad.double(), expected_grad, 1e-4):
            return [f"the value is right but its gradient differs {largest_difference(grad.double(), expected_grad)}"]
    return []


# ------------------------------------------------------------------------------- the lesson


def comparison(plan: Plan, records: Mapping[str, Record]) -> pd.DataFrame:
    """ACC, AUROC and H per corruption and their mean of each method on the paper's stream
    (the cells without a variant), one row per (method, corruption)."""
    frame = plan_frame(plan, records, per_corruption=True)
    if frame.empty:
        return frame
    frame = frame[frame["variant"] == ""]
    frame = frame.assign(Method=frame["method"].map(method_label))
    return frame[["Method", "method", "corruption", "acc", "auroc", "h"]].reset_index(drop=True)


def plot_comparison(frame: pd.DataFrame, metric: str = "acc", title: str = "") -> plt.Figure:
    """``metric`` per corruption, one bar per method."""
    rows = frame[frame["corruption"] != "mean"]
    order = list(dict.fromkeys(rows["Method"]))
    colours = method_colours(order)
    corruptions = list(dict.fromkeys(rows["corruption"]))
    fig, ax = plt.subplots(figsize=(8, 3.4))
    width = 0.8 / max(1, len(order))
    for i, method in enumerate(order):
        values = rows[rows["Method"] == method].set_index("corruption")[metric].reindex(corruptions)
        ax.bar([j + (i - (len(order) - 1) / 2) * width for j in range(len(corruptions))], values, width,
               label=method, color=colours[method])
    ax.set_xticks(range(len(corruptions)), [c.replace("_", " ") for c in corruptions])
    ax.set(ylabel=f"{METRIC_LABELS[metric]} (%)", ylim=(0, 100), title=title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def mean_of(frame: pd.DataFrame, method: str, metric: str) -> float:
    """The mean over corruptions of ``metric`` for ``method`` (NaN without its record)."""
    rows = frame[(frame["method"] == method) & (frame["corruption"] == "mean")]
    return float(rows[metric].iloc[0]) if not rows.empty else math.nan


def comparison_text(frame: pd.DataFrame) -> str:
    """What the comparison shows, in numbers from the records."""
    source, bn, tent = (mean_of(frame, m, "acc") for m in ("source", "bn_stats", "tent"))
    auroc_bn, auroc_tent = mean_of(frame, "bn_stats", "auroc"), mean_of(frame, "tent", "auroc")
    if any(math.isnan(v) for v in (source, bn, tent)):
        return "Some of the three records are missing: compute the cells first."
    return (f"Mean over the corruptions: the source model recognises {source:.1f} % of the known-class images; "
            f"re-estimating the BatchNorm statistics on each batch (BN Stats) {'lifts' if bn > source else 'takes'} "
            f"that "
            f"to {bn:.1f} % without "
            f"changing a single weight; Tent's entropy minimisation, on top of it, gives {tent:.1f} % "
            f"({tent - bn:+.1f} points). Its outlier rejection moves from AUROC {auroc_bn:.1f} (BN Stats) to "
            f"{auroc_tent:.1f}: lesson 15 is about that.")


@torch.no_grad()
def batch_norm_shift(model: nn.Module, images: Mapping[str, torch.Tensor]) -> pd.DataFrame:
    """How far each BatchNorm layer's input statistics on a batch are from the source model's
    running statistics, per batch of ``images`` (name → float [N, 3, H, W]): ``mean_shift`` is
    the mean over channels of |μ_batch − μ_running| / σ_running, ``variance_ratio`` the mean of
    σ²_batch / σ²_running. The model runs in eval mode (with its running statistics)."""
    layers = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.BatchNorm2d)]
    rows = []
    for stream, x in images.items():
        captured: dict[str, torch.Tensor] = {}
        hooks = [m.register_forward_pre_hook(lambda _m, inputs, n=name, into=captured: into.__setitem__(n, inputs[0]))
                 for name, m in layers]
        try:
            model.eval()(x)
        finally:
            for hook in hooks:
                hook.remove()
        for index, (name, m) in enumerate(layers):
            inp = captured[name]
            mean, var = inp.mean(dim=(0, 2, 3)), inp.var(dim=(0, 2, 3), unbiased=False)
            sigma = torch.sqrt(m.running_var + m.eps)
            rows.append({"stream": stream, "layer": index, "name": name,
                         "mean_shift": float(((mean - m.running_mean).abs() / sigma).mean()),
                         "variance_ratio": float((var / (m.running_var + m.eps)).mean())})
    return pd.DataFrame(rows)


def shift_on_streams(plan: Plan, context: RunContext, count: int = 256) -> pd.DataFrame:
    """:func:`batch_norm_shift` of the source model of the plan's data set on ``count`` clean
    known-class images and on the same number from each corruption of its streams."""
    spec = plan.cells[0].spec
    model = source_model(spec.dataset, progress=False, network=spec.network)
    images = {name: known_class_images(build_stream(spec, corruption, data_root=context.data_root), count)
              for name, corruption in [("clean", "none"), *[(c, c) for c in spec.corruptions]]}
    return batch_norm_shift(model, images)


def known_class_images(stream: Stream, count: int = 256) -> torch.Tensor:
    """The first ``count`` known-class images of a stream as float [N, 3, H, W] in [0, 1]."""
    chosen = stream.images[~stream.is_outlier][:count]
    return chosen.permute(0, 3, 1, 2).float().div(255.0)


def plot_batch_norm_shift(frame: pd.DataFrame) -> plt.Figure:
    """Per BatchNorm layer (in network order): the standardised mean shift and the variance
    ratio of its input, one line per stream (clean, each corruption)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for stream, rows in frame.groupby("stream", sort=False):
        style = {"color": "black", "linestyle": "--"} if stream == "clean" else {}
        axes[0].plot(rows["layer"], rows["mean_shift"], marker="o", label=stream.replace("_", " "), **style)
        axes[1].plot(rows["layer"], rows["variance_ratio"], marker="o", label=stream.replace("_", " "), **style)
    axes[0].set(xlabel="BatchNorm layer (input → output)", ylabel="|μ_batch − μ_source| / σ_source",
                title="input mean, against training")
    axes[1].set(xlabel="BatchNorm layer (input → output)", ylabel="σ²_batch / σ²_source (log scale)", yscale="log",
                title="input variance, against training")
    # one set of labels on the log axis: plain numbers at the major ticks, none at the minor ones
    # (matplotlib labels both when the range spans less than a decade, and they collide)
    axes[1].yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axes[1].yaxis.set_major_formatter(FormatStrFormatter("%g"))
    axes[1].yaxis.set_minor_formatter(NullFormatter())
    axes[1].axhline(1.0, color="grey", linewidth=0.8)
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, title="images")
    fig.tight_layout(w_pad=2.0)
    return fig


def batch_norm_shift_text(frame: pd.DataFrame) -> str:
    """Per stream, the largest mean shift and the variance ratio farthest from 1, in words, each
    corruption against the clean images (the direction of each change read from the numbers)."""
    parts, peaks = [], {}
    for stream, rows in frame.groupby("stream", sort=False):
        shift = rows.loc[rows["mean_shift"].idxmax()]
        ratio = rows.loc[(rows["variance_ratio"].apply(math.log)).abs().idxmax()]
        side = "above" if ratio["variance_ratio"] > 1 else "below"
        peaks[stream] = (shift["mean_shift"], ratio["variance_ratio"])
        parts.append(f"{stream.replace('_', ' ')}: mean shifted by up to {shift['mean_shift']:.2f} σ (layer "
                     f"{int(shift['layer'])}), variance × {ratio['variance_ratio']:.2f} (layer {int(ratio['layer'])}, "
                     f"{side} training)")
    text = "Against the training statistics, per stream — " + "; ".join(parts) + "."
    if "clean" in peaks and len(peaks) > 1:
        clean_shift, clean_ratio = peaks["clean"]
        against = []
        for stream, (shift, ratio) in peaks.items():
            if stream == "clean":
                continue
            farther = "farther from" if abs(math.log(ratio)) > abs(math.log(clean_ratio)) else "nearer to"
            against.append(f"{stream.replace('_', ' ')} shifts the mean {'more' if shift > clean_shift else 'less'} "
                           f"({shift:.2f} σ against {clean_shift:.2f} σ) and leaves the variance {farther} training's")
        text += (" Clean test images already differ from the running statistics (256 images are not the training "
                 "set); what a corruption changes is the difference from the clean line: " + "; ".join(against) + ".")
    return text + (" BN Stats normalises every layer with the batch's own mean and variance, so the next layer gets "
                   "standardised features again, whichever way they moved.")


def wide(frame: pd.DataFrame, metric: str = "acc") -> pd.DataFrame:
    """``metric`` per method (rows) and corruption (columns, in stream order, the mean last)."""
    columns = list(dict.fromkeys(frame["corruption"]))
    table = frame.pivot_table(index="Method", columns="corruption", values=metric, sort=False)
    return table.reindex(index=list(dict.fromkeys(frame["Method"])), columns=columns)


def long_stream(plan: Plan, records: Mapping[str, Record], results: str | Path) -> pd.DataFrame:
    """Per method and long-stream variant (with and without outliers), per corruption in stream
    order: ACC and the share of the most predicted class (:func:`per_corruption_shares`)."""
    parts = []
    for cell in plan.cells:
        record = records.get(cell.spec.key())
        if cell.variant not in (LONG_STREAM, LONG_STREAM_CLOSED) or record is None:
            continue
        shares = per_corruption_shares(record, results)
        shares.insert(0, "position", range(1, len(shares) + 1))
        parts.append(shares.assign(Method=method_label(cell.spec.method), stream=cell.variant))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def plot_long_stream(frame: pd.DataFrame, streams: tuple[str, ...] = (LONG_STREAM,)) -> plt.Figure:
    """ACC and the most predicted class's share along the long stream, one line per method
    (dashed: without outliers)."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharex=True)  # room for fifteen rotated names and the labels
    colours = method_colours(frame["Method"]) if not frame.empty else {}
    for (method, stream), rows in frame[frame["stream"].isin(streams)].groupby(["Method", "stream"], sort=False):
        style = {"linestyle": "--"} if stream == LONG_STREAM_CLOSED else {}
        label = method if len(streams) == 1 else f"{method}, {stream}"
        axes[0].plot(rows["position"], rows["acc"], marker="o", color=colours[method], label=label, **style)
        axes[1].plot(rows["position"], 100 * rows["top_class_share"], marker="o", color=colours[method],
                     label=label, **style)
    corruptions = list(dict.fromkeys(frame["corruption"])) if not frame.empty else []
    for ax in axes:
        ax.set_xticks(range(1, len(corruptions) + 1), [c.replace("_", " ") for c in corruptions], rotation=60,
                      ha="right", fontsize=9)
    axes[0].set(ylabel="ACC (%)", title="known-class accuracy along the stream")
    # a short label: a long one, centred on the axis, ran up into the suptitle
    axes[1].set(ylabel="share of predictions (%)", title="the most predicted class's share")
    axes[1].axhline(10.0, color="grey", linewidth=0.8)
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.suptitle("One stream through all corruptions in turn, adapted without a reset")
    fig.tight_layout()
    return fig


def long_stream_text(frame: pd.DataFrame) -> str:
    """Tent against BN Stats on the long stream with outliers, in numbers from the records."""
    rows = frame[frame["stream"] == LONG_STREAM] if not frame.empty else frame
    tent, bn = (rows[rows["Method"] == method_label(m)] for m in ("tent", "bn_stats"))
    if tent.empty or bn.empty:
        return "The long-stream records are missing: compute the cells first."
    first, last = tent.iloc[0], tent.iloc[-1]
    return (f"{drift_verdict(last['top_class_share'], bn['top_class_share'].max())} "
            f"Along the {len(tent)} corruptions Tent's most predicted class goes from "
            f"{100 * first['top_class_share']:.0f} % of the known-class predictions on "
            f"{first['corruption'].replace('_', ' ')} "
            f"to {100 * last['top_class_share']:.0f} % on {last['corruption'].replace('_', ' ')} (BN Stats, which "
            f"does not learn: {100 * bn['top_class_share'].min():.0f}–{100 * bn['top_class_share'].max():.0f} %), "
            f"and its accuracy ends {last['acc'] - bn.iloc[-1]['acc']:+.1f} points from BN Stats' "
            f"({last['acc']:.1f} % against {bn.iloc[-1]['acc']:.1f} %; mean over the stream "
            f"{tent['acc'].mean():.1f} % against {bn['acc'].mean():.1f} %).")


#: The most predicted class's share above which the lesson calls entropy minimisation collapsed.
COLLAPSED_SHARE = 0.5


def drift_verdict(share: float, reference_share: float) -> str:
    """What the most predicted class's share (``share`` at the end, against BN Stats' largest,
    ``reference_share``) says, in one sentence: collapsed (one class takes half the predictions
    or more), drifting (5 points or more above BN Stats), or as spread as BN Stats."""
    if share >= COLLAPSED_SHARE:
        return f"**Tent collapses here**: at the end one class takes {100 * share:.0f} % of its predictions."
    if share >= reference_share + 0.05:
        return (f"**Tent drifts towards one class here, without collapsing**: its most predicted class ends at "
                f"{100 * share:.0f} % of its predictions, above BN Stats' {100 * reference_share:.0f} %, but no class "
                f"takes "
                "half of them.")
    return (f"**Tent does not drift here**: its most predicted class ends at {100 * share:.0f} %, no more than BN "
            f"Stats' {100 * reference_share:.0f} % (+5 points).")
