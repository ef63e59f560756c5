"""The walkthrough's figures (notebook 00): one stream, STAMP's memory along it, entropies
before and after adapting, and a small comparison per corruption."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
import torch

from stamplib.data.streams import Stream
from stamplib.report.palette import method_colours
from stamplib.report.paper import method_label


def draw_stream_image(ax: plt.Axes, image: torch.Tensor, label: int | torch.Tensor,
                      class_names: Sequence[str] = (), frame_width: float = 3.0) -> str:
    """One uint8 H×W×3 stream image on ``ax`` without ticks, framed red if it is an outlier
    (``label`` < 0); returns its name (``class_names[label]`` where given, else the number)."""
    ax.imshow(image.numpy())
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_edgecolor("red" if label < 0 else "white")
        spine.set_linewidth(frame_width)
    if label < 0:
        return "outlier"
    return class_names[int(label)] if int(label) < len(class_names) else f"{int(label)}"


def plot_stream_examples(stream: Stream, count: int = 24, per_row: int = 12,
                         class_names: Sequence[str] = ()) -> plt.Figure:
    """The first ``count`` images of a stream, outliers framed in red, labels (``class_names``
    where given, e.g. a data set's ``class_names``) as titles."""
    rows = -(-count // per_row)
    fig, axes = plt.subplots(rows, per_row, figsize=(per_row, 1.15 * rows), squeeze=False)
    for ax, img, label in zip(axes.flat, stream.images[:count], stream.labels[:count]):
        ax.set_title(draw_stream_image(ax, img, label, class_names), fontsize=8)
    return fig


def plot_stamp_traces(traces: Mapping[str, Mapping[str, Sequence]], num_classes: int,
                      class_names: Sequence[str] = ()) -> plt.Figure:
    """Per traced STAMP run (a :class:`~stamplib.evaluation.traces.StreamTracer`'s columns by
    label): memory content by (pseudo-)class, the step size used, and the reliable samples per
    batch, one row per run."""
    fig, axes = plt.subplots(len(traces), 3, figsize=(14, 3.2 * len(traces)), sharex=True, squeeze=False)
    for row, (label, columns) in zip(axes, traces.items()):
        counts = torch.tensor(columns["memory_counts"])
        names = [class_names[c] if c < len(class_names) else str(c) for c in range(num_classes)]
        row[0].stackplot(range(len(counts)), counts.T.numpy(), labels=names)
        row[0].set(title=f"memory content by class, {label} views", ylabel="samples in memory")
        row[1].plot(columns["step_size"])
        row[1].set(title="step size used", ylabel="learning rate")
        row[2].plot(columns["n_passed"])
        row[2].set(title=f"reliable samples per batch, {label} views", ylabel="count")
    axes[0][0].legend(ncol=4, fontsize=8, title="class", title_fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel("batch")
    fig.tight_layout()
    return fig


def plot_entropy_before_after(before: torch.Tensor, after: torch.Tensor, is_outlier: torch.Tensor,
                              titles: Sequence[str] = ("before adaptation (BN Stats)", "after STAMP adapted")
                              ) -> plt.Figure:
    """Histograms of the entropy of known-class samples and of outliers, side by side."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), sharey=True)
    for ax, values, title in zip(axes, (before, after), titles):
        ax.hist(values[~is_outlier].numpy(), bins=30, alpha=0.6, density=True, label="known classes")
        ax.hist(values[is_outlier].numpy(), bins=30, alpha=0.6, density=True, label="outliers")
        ax.set(title=title, xlabel="entropy (nats)")
    axes[0].set_ylabel("density")
    axes[0].legend()
    return fig


def plot_h_per_corruption(frame: pd.DataFrame, title: str) -> plt.Figure:
    """H-score per corruption and method, from a per-corruption frame (its mean rows left out):
    each method in its colour of :mod:`stamplib.report.palette` under its paper name, the legend
    beside the axis, where it hides no bar."""
    per_corruption = frame[frame["corruption"] != "mean"].assign(
        Method=lambda f: f["method"].map(method_label), corruption=lambda f: f["corruption"].str.replace("_", " "))
    order = list(dict.fromkeys(per_corruption["Method"]))
    fig, ax = plt.subplots(figsize=(10, 3.4))
    sns.barplot(per_corruption, x="corruption", y="h", hue="Method", hue_order=order, palette=method_colours(order),
                saturation=1.0, ax=ax)  # the palette's colours as they are, not greyed
    ax.set(title=title, xlabel="", ylabel="H-score (%)", ylim=(0, 100))
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, title="method")
    fig.tight_layout()
    return fig


def comparison_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The comparison's table from a per-corruption frame: one row per method under its paper name
    (``BN Stats``, as the lessons and the figure's legend name it, not the registry's ``bn_stats``),
    with its ACC, AUROC and H averaged over the corruptions and whether it collapsed."""
    means = frame[frame["corruption"] == "mean"]
    return pd.DataFrame({"Method": means["method"].map(method_label), "ACC": means["acc"], "AUROC": means["auroc"],
                         "H": means["h"], "collapsed": means["collapsed"]}).reset_index(drop=True)
