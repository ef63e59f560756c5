"""Scrub a stream batch by batch: ``stamplib.explore(...)``.

The run is computed once (a method, built as the runner builds it, over one corruption's
stream, with the per-batch columns of :mod:`stamplib.evaluation.traces`: each batch's filter
mask, memory histogram and step size, as the method reports them); moving the slider only redraws from that record, so
a redraw costs one matplotlib
figure (well under a second on a CPU). The view of batch ``i``:

* the batch's images, outliers framed in red, samples through the method's filter ticked;
* the memory's contents by (pseudo-)class after the batch;
* histograms of the OOD score of known-class samples and outliers seen so far;
* running ACC, AUROC and H over the batches seen so far, and the step size.

An explorer left as a cell's value displays itself (Jupyter's display protocol): the slider in
JupyterLab (:meth:`StreamExplorer.widget`, ipywidgets from the ``notebooks`` extra); without a
front end (papermill, a terminal) or without ipywidgets, :meth:`StreamExplorer.summary` draws
the start, middle and end of the stream as one static figure (:func:`show` picks). Its text
repr is one line.

The run is kept in the results store (``<results>/.explorer/``: the per-sample outputs, each
batch's filter decisions and the traces), so exploring the same cell again — the same method,
hyperparameters, stream and seed — redraws it without running the method; the method as it
ended the stream (:attr:`StreamExplorer.method`) is then rebuilt only if it is asked for.
"""

from __future__ import annotations

import io
import json
import math
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch
from tqdm.std import tqdm as tqdm_text

from stamplib import paths
from stamplib.evaluation.assembly import build_method, build_stream, stand_in_overrides
from stamplib.evaluation.metrics import accuracy, auroc, h_score
from stamplib.evaluation.profiles import get_profile
from stamplib.evaluation.runner import run_stream
from stamplib.evaluation.spec import RunSpec
from stamplib.evaluation.store import current_config
from stamplib.evaluation.traces import StreamTracer
from stamplib.extras import MissingExtra, require
from stamplib.validation import literal_or_text


@dataclass(repr=False)
class StreamExplorer:
    """A precomputed run and everything its views need (see the module docstring)."""

    title: str
    num_classes: int
    batch_size: int
    images: np.ndarray  # uint8 [N, H, W, 3], stream order
    labels: np.ndarray  # [N], −1 = outlier
    predictions: np.ndarray  # [N]
    scores: np.ndarray  # [N], higher = outlier
    masks: list[np.ndarray | None]  # per batch: passed the filter (None: no filter)
    memory_counts: list[list[int] | None]  # per batch: memory histogram after it
    lrs: list[float]  # per batch: step size used (NaN: not reported)
    running: dict[str, np.ndarray]  # acc / auroc / h after each batch (percent)
    # The tracer's columns (evaluation/traces.py) and the method as it ended the stream, so a
    # notebook can plot the traces or read the adapted model without running the stream again.
    trace: dict[str, list] = field(default_factory=dict)
    _method: Any = None
    # For a run read back from the results store: runs the stream again for the adapted method.
    _rerun: Callable[[], Any] | None = None

    @property
    def method(self) -> Any:
        """The method as it ended the stream (for a run read back from the results store, the
        stream is run again the first time this is asked for)."""
        if self._method is None and self._rerun is not None:
            self._method = self._rerun()
        return self._method

    @property
    def num_batches(self) -> int:
        return len(self.masks)

    def __repr__(self) -> str:
        return (f"<StreamExplorer: {self.title}, {self.num_batches} batches of {self.batch_size}; "
                "display it (a cell's last line) for the slider>")

    def _ipython_display_(self) -> None:
        """A cell's value: the slider where a front end is live, else the static summary."""
        view = show(self)
        _ipython().display.display(view)  # called by IPython only: it is installed
        if isinstance(view, plt.Figure):
            plt.close(view)  # displayed once: the inline backend would show it again at the cell's end

    def batch_slice(self, i: int) -> slice:
        if not 0 <= i < self.num_batches:
            raise IndexError(f"batch {i} is outside the stream's {self.num_batches} batches (0–{self.num_batches - 1})")
        return slice(i * self.batch_size, min((i + 1) * self.batch_size, len(self.labels)))

    # -- drawing ---------------------------------------------------------------------------------
    def draw(self, i: int, fig: plt.Figure | None = None, max_images: int = 32) -> plt.Figure:
        """The view of batch ``i`` (into ``fig`` when given, cleared first)."""
        sl = self.batch_slice(i)
        fig = fig or plt.figure(figsize=(13, 6.2))
        fig.clear()
        grid = fig.add_gridspec(2, 4, height_ratios=(1.1, 1.0))
        self._draw_images(fig.add_subplot(grid[0, :2]), sl, i, max_images)
        self._draw_memory(fig.add_subplot(grid[0, 2]), i)
        self._draw_histograms(fig.add_subplot(grid[0, 3]), sl.stop)
        self._draw_running(fig.add_subplot(grid[1, :3]), i)
        self._draw_lr(fig.add_subplot(grid[1, 3]), i)
        fig.suptitle(f"{self.title} — batch {i + 1} of {self.num_batches}")
        fig.tight_layout()
        return fig

    def _draw_images(self, ax: plt.Axes, sl: slice, i: int, max_images: int) -> None:
        images, labels = self.images[sl][:max_images], self.labels[sl][:max_images]
        mask = self.masks[i][:max_images] if self.masks[i] is not None else None
        cols = 8
        rows = math.ceil(len(images) / cols)
        h, w = images.shape[1:3]
        canvas = np.full((rows * (h + 4), cols * (w + 4), 3), 255, dtype=np.uint8)
        for k, (img, y) in enumerate(zip(images, labels)):
            r, c = divmod(k, cols)
            top, left = r * (h + 4), c * (w + 4)
            if y < 0:  # outliers framed in red
                canvas[top : top + h + 4, left : left + w + 4] = (220, 30, 30)
            canvas[top + 2 : top + 2 + h, left + 2 : left + 2 + w] = img
        ax.imshow(canvas, interpolation="nearest")
        if mask is not None:
            for k, passed in enumerate(mask):
                if passed:
                    r, c = divmod(k, cols)
                    ax.text(c * (w + 4) + 3, r * (h + 4) + 9, "✓", color="lime", fontsize=9, weight="bold")
        ax.set_axis_off()
        through = ("" if mask is None
                   else f"; ✓ = passed the filter ({int(self.masks[i].sum())} of {len(self.masks[i])})")
        ax.set_title(f"the batch (first {len(images)}): red = outlier{through}", fontsize=9)

    def _draw_memory(self, ax: plt.Axes, i: int) -> None:
        counts = self.memory_counts[i]
        if counts is None:
            ax.text(0.5, 0.5, "no memory", ha="center", va="center")
            ax.set_axis_off()
            return
        ax.bar(range(self.num_classes), counts, color="tab:blue")
        ax.set(title=f"memory by class ({sum(counts)} items)", xlabel="class", ylabel="items")

    def _draw_histograms(self, ax: plt.Axes, upto: int) -> None:
        scores, labels = self.scores[:upto], self.labels[:upto]
        finite = np.isfinite(scores)
        bins = np.linspace(*np.nanpercentile(scores[finite], [0.5, 99.5]), 30) if finite.any() else 30
        ax.hist(scores[(labels >= 0) & finite], bins=bins, alpha=0.6, label="known", density=True)
        ax.hist(scores[(labels < 0) & finite], bins=bins, alpha=0.6, label="outlier", density=True)
        ax.set(title="OOD score so far", xlabel="score (higher = outlier)")
        ax.legend(fontsize=8)

    def _draw_running(self, ax: plt.Axes, i: int) -> None:
        x = np.arange(1, self.num_batches + 1)
        for name, label in (("acc", "ACC"), ("auroc", "AUROC"), ("h", "H")):
            ax.plot(x, self.running[name], alpha=0.3)
            ax.plot(x[: i + 1], self.running[name][: i + 1], label=f"{label} {self.running[name][i]:.1f}")
        ax.axvline(i + 1, color="grey", lw=0.8)
        ax.set(title="running metrics over the batches seen", xlabel="batch", ylabel="%", ylim=(0, 100))
        ax.legend(fontsize=8, loc="lower right")

    def _draw_lr(self, ax: plt.Axes, i: int) -> None:
        if not np.isfinite(self.lrs).any():
            ax.text(0.5, 0.5, "no step size reported", ha="center", va="center")
            ax.set_axis_off()
            return
        x = np.arange(1, self.num_batches + 1)
        ax.plot(x, self.lrs, color="tab:purple")
        ax.axvline(i + 1, color="grey", lw=0.8)
        ax.set(title="step size", xlabel="batch")

    def summary(self) -> plt.Figure:
        """The static view for headless runs: the first, middle and last batch's running
        metrics and score histograms, and the step size."""
        picks = sorted({0, self.num_batches // 2, self.num_batches - 1})
        fig, axes = plt.subplots(1, len(picks) + 1, figsize=(4.2 * (len(picks) + 1), 3.4))
        for ax, i in zip(axes, picks):
            self._draw_histograms(ax, self.batch_slice(i).stop)
            r = {k: v[i] for k, v in self.running.items()}
            ax.set_title(f"after batch {i + 1}: ACC {r['acc']:.1f} AUROC {r['auroc']:.1f} H {r['h']:.1f}", fontsize=9)
        self._draw_lr(axes[-1], self.num_batches - 1)
        fig.suptitle(f"{self.title} (static summary: no interactive front end)")
        fig.tight_layout()
        return fig

    def caption(self, i: int) -> str:
        """One line on batch ``i``: its place in the stream, the filter's decisions and the
        running metrics (the slider's label, and what a browser test reads)."""
        sl = self.batch_slice(i)
        r = {k: v[i] for k, v in self.running.items()}
        mask = self.masks[i]
        passed = "no filter" if mask is None else (
            f"{int(mask.sum())} of {sl.stop - sl.start} passed the filter "
            f"({int((mask.astype(bool) & (self.labels[sl] < 0)).sum())} outliers)")
        return (f"batch {i + 1} of {self.num_batches}: {passed}; running ACC {r['acc']:.1f}, "
                f"AUROC {r['auroc']:.1f}, H {r['h']:.1f}")

    def widget(self) -> Any:
        """A batch slider above the view (ipywidgets); each move redraws from the stored run."""
        widgets = require("ipywidgets", "notebooks", "the explorer's slider")
        # 1-based, as the caption and the figure title count batches
        slider = widgets.IntSlider(value=1, min=1, max=self.num_batches, description="batch",
                                   continuous_update=False)
        label = widgets.HTML()
        label.add_class("stamplib-explorer-caption")
        # The drawing is a PNG in an Image widget, not display() inside an Output widget: that
        # capture swaps the kernel's parent header, and under load a client (papermill) could
        # miss the end of the cell and wait forever.
        picture = widgets.Image(format="png")
        picture.add_class("stamplib-explorer-view")
        fig = plt.figure(figsize=(13, 6.2))
        plt.close(fig)  # drawn into the Image, not shown again by the inline backend

        def redraw(change: Any = None) -> None:
            self.draw(slider.value - 1, fig)
            label.value = self.caption(slider.value - 1)
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png", dpi=80)
            picture.value = buffer.getvalue()

        slider.observe(redraw, names="value")
        redraw()
        return widgets.VBox([slider, label, picture])


def _running_metrics(predictions: np.ndarray, scores: np.ndarray, labels: np.ndarray,
                     batch_size: int) -> dict[str, np.ndarray]:
    out: dict[str, list[float]] = {"acc": [], "auroc": [], "h": []}
    p, s, y = (torch.from_numpy(a) for a in (predictions, scores.astype(np.float64), labels))
    for end in range(batch_size, len(labels) + batch_size, batch_size):
        end = min(end, len(labels))
        acc, auc = accuracy(p[:end], y[:end]), auroc(s[:end], y[:end] < 0)
        out["acc"].append(acc)
        out["auroc"].append(auc)
        out["h"].append(h_score(acc, auc))
    return {k: np.asarray(v) for k, v in out.items()}


def explore(
    method: str = "stamp",
    *,
    context: paths.RunContext | None = None,
    dataset: str = "",
    corruption: str = "gaussian_noise",
    severity: int = 5,
    outlier_set: str = "noise",
    outlier_ratio: float = 0.2,
    max_id: int | None = None,
    seed: int = 0,
    hyperparameter_set: str = "",
    profile: str = "quick",
    progress: bool = True,
    reuse: bool = True,
    **hyperparameters: Any,
) -> StreamExplorer:
    """Run ``method`` once over one corruption's stream and return a :class:`StreamExplorer`
    (``explorer.widget()`` in JupyterLab; :func:`show` picks the widget or the static summary).
    ``dataset``: the known-class data set (default: the profile's built-in benchmark, the
    CIFAR-10 photographs in the quick profile); ``max_id`` known-class samples (default: as
    many as ``profile`` uses); ``hyperparameter_set``: the methods' hyperparameters to run instead
    of the data set's own (e.g. ``"imagenet_c"``); ``hyperparameters`` override single ones of it
    (e.g. ``alpha=0.4`` for STAMP); ``context``: the data root the data sets are read from and the
    device the method runs on (a notebook's, built from its parameters cell; without one, the
    default that :meth:`stamplib.paths.RunContext.build` builds, as ``stamplib.run`` and the
    command line do, so that ``stamplib.explore("stamp")`` works in a fresh kernel).
    ``progress``: a bar over the batches while the method runs. ``reuse``: redraw a run of the
    same cell kept in the results store instead of running the method again (module docstring)."""
    context = context if context is not None else paths.RunContext.build()
    dataset = dataset or get_profile(profile).builtin
    spec = RunSpec.make(
        method, overrides={**stand_in_overrides(method, dataset, hyperparameter_set), **hyperparameters},
        dataset=dataset, outlier_set=outlier_set, corruptions=(corruption,), severity=severity,
        outlier_ratio=outlier_ratio, seed=seed, profile=profile, hyperparameter_set=hyperparameter_set,
    )
    extra = ", ".join(f"{k}={v}" for k, v in hyperparameters.items())
    title = f"{method}{f' ({extra})' if extra else ''} on {dataset} / {corruption} {severity} + {outlier_set}"
    kept = _kept_path(Path(context.results), spec, max_id)
    stored = _read_kept(kept, current_config(spec)) if reuse else None
    stream = build_stream(spec, max_id=max_id, data_root=context.data_root)
    if stored is not None and len(stored["labels"]) == len(stream.labels):
        def rerun() -> Any:
            return _run(spec, stream, context, progress)[0]

        return _explorer(title, stream, stored, _rerun=rerun)
    tta, run = _run(spec, stream, context, progress)
    _keep(kept, current_config(spec), run)
    return _explorer(title, stream, run, _method=tta)


def _run(spec: RunSpec, stream: Any, context: paths.RunContext, progress: bool) -> tuple[Any, dict[str, Any]]:
    """Run the spec's method over ``stream`` with a tracer: the method as it ended, and the run."""
    device = context.device
    tta = build_method(spec, device, data_root=context.data_root)
    if progress:  # where the progress bar goes (progress_file)
        print(f"exploring {spec.method} over {len(stream)} batches of {stream.batch_size} on {device} "
              "(kept in the results store: exploring this cell again redraws it at once)", file=progress_file(),
              flush=True)
    tracer = _CountingTracer(stream, tta.num_classes, device) if progress else StreamTracer(stream, tta.num_classes,
                                                                                            device)
    try:
        result = run_stream(tta, stream, device, tracer=tracer)
    finally:
        if progress:
            tracer.bar.close()
    return tta, {"num_classes": tta.num_classes, "predictions": result.probs.argmax(1).numpy(),
                 "scores": result.ood_score.numpy(), "labels": result.labels.numpy(), "trace": tracer.columns}


class _CountingTracer(StreamTracer):
    """A tracer that also moves a text progress bar, one step per batch. Text, not a widget: a
    notebook served by Voilà renders its outputs after the run, when a closed widget bar is gone."""

    def __init__(self, stream: Any, num_classes: int, device: str) -> None:
        super().__init__(stream, num_classes, device)
        self.bar = tqdm_text(total=len(stream), desc="batches", unit="batch", file=progress_file())

    def end(self, batch: Any, report: Any = None, probs: Any = None) -> None:
        super().end(batch, report, probs)
        self.bar.update(1)


def _explorer(title: str, stream: Any, run: dict[str, Any], **method: Any) -> StreamExplorer:
    trace = run["trace"]
    predictions, scores, labels = run["predictions"], run["scores"], run["labels"]
    return StreamExplorer(
        title=title,
        num_classes=run["num_classes"],
        batch_size=stream.batch_size,
        images=stream.images.numpy(),
        labels=labels,
        predictions=predictions,
        scores=scores,
        masks=trace["passed"],
        memory_counts=trace["memory_counts"],
        lrs=[math.nan if s is None else s for s in trace["step_size"]],
        running=_running_metrics(predictions, scores, labels, stream.batch_size),
        trace=trace,
        **method,
    )


def _kept_path(results: Path, spec: RunSpec, max_id: int | None) -> Path:
    return results / ".explorer" / f"{spec.method}__{spec.key()}__{max_id or 'profile'}.npz"


def _keep(path: Path, config: str, run: dict[str, Any]) -> None:
    """Keep ``run`` at ``path``; a store that cannot take it (read-only, full) only costs the reuse."""
    trace = run["trace"]
    passed = trace["passed"]
    sizes = [len(m) if m is not None else 0 for m in passed]
    flat = np.concatenate([np.asarray(m, dtype=np.int8) for m in passed if m is not None] or [np.zeros(0, np.int8)])
    meta = {"config": config, "num_classes": run["num_classes"], "mask_sizes": sizes,
            "has_mask": [m is not None for m in passed],
            "trace": {k: v for k, v in trace.items() if k != "passed"}}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, predictions=run["predictions"], scores=run["scores"], labels=run["labels"],
                        passed=flat, meta=np.array(json.dumps(meta)))
    try:
        paths.atomic_write_bytes(path, buffer.getvalue())
    except OSError as exc:
        warnings.warn(f"the explorer's run is not kept in {path.parent} ({exc.strerror or exc}); exploring this "
                      "cell again runs the method again", stacklevel=3)


def _read_kept(path: Path, config: str) -> dict[str, Any] | None:
    """The run kept at ``path``, or None: absent, unreadable, or made under other hyperparameters."""
    try:
        with np.load(path, allow_pickle=False) as kept:
            meta = json.loads(str(kept["meta"]))
            run = {name: kept[name] for name in ("predictions", "scores", "labels", "passed")}
    except (OSError, ValueError, KeyError, EOFError):
        return None
    if meta.get("config") != config:
        return None
    masks, start = [], 0
    for size, has in zip(meta["mask_sizes"], meta["has_mask"]):
        masks.append(run["passed"][start:start + size].astype(bool) if has else None)
        start += size
    return {"num_classes": meta["num_classes"], "predictions": run["predictions"], "scores": run["scores"],
            "labels": run["labels"], "trace": {**meta["trace"], "passed": masks}}


def parse_hyperparameters(text: str) -> dict[str, Any]:
    """``"alpha:0.4,num_views:1"`` → ``{"alpha": 0.4, "num_views": 1}`` (a notebook parameter:
    papermill cannot read ``=`` inside a string default, hence ``:``). Values are Python
    literals where they parse as one, else strings."""
    out: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"expected NAME:VALUE pairs separated by commas, got {item!r} (e.g. "
                             f"'alpha:0.4,num_views:1')")
        out[name.strip()] = literal_or_text(value.strip())
    return out


def _ipython() -> Any:
    """The IPython package, with its display module; None where it is not installed (then no
    kernel runs this)."""
    try:
        import IPython.display
    except ImportError:
        return None
    return IPython


def progress_file() -> Any:
    """Where the explorer's progress goes: standard output in a Jupyter kernel, since JupyterLab
    draws a kernel's stderr in a pink box that reads as an error; stderr elsewhere, so that a
    script's standard output stays its own."""
    ipython = _ipython()
    shell = ipython.get_ipython() if ipython is not None else None
    return sys.stdout if getattr(shell, "kernel", None) is not None else sys.stderr


def _in_a_live_kernel() -> bool:
    """Whether a Jupyter kernel with a front end runs this (not papermill, which the notebook
    runner marks with ``STAMPLIB_HEADLESS=1``: a widget there would be stored inert)."""
    if paths.environment("STAMPLIB_HEADLESS"):
        return False
    ipython = _ipython()
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def show(explorer: StreamExplorer) -> Any:
    """The slider where a kernel can show widgets, else (a plain Python process, or papermill)
    the static summary figure; in a kernel without ipywidgets, the summary and a warning that
    names the ``pip install`` which adds the slider."""
    if not _in_a_live_kernel():
        return explorer.summary()
    try:
        return explorer.widget()
    except MissingExtra as err:
        warnings.warn(f"{err}; showing the static summary instead", stacklevel=2)
        return explorer.summary()
