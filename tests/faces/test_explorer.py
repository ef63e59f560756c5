"""The stream explorer: precomputed once, every view drawn from the stored run, the slider
redraws the batch it points at, and a process without a front end gets the static summary."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import stamplib  # noqa: E402
from stamplib import methods  # noqa: E402
from stamplib.evaluation import metrics  # noqa: E402
from stamplib.explorer import show  # noqa: E402


@pytest.fixture(scope="module")
def stamp_run(digits_model):
    return stamplib.explore("stamp", context=stamplib.RunContext.build(), max_id=160, num_views=4)


def test_the_explorer_keeps_every_batch_and_its_running_metrics(stamp_run) -> None:
    ex = stamp_run
    assert ex.num_batches == -(-200 // 64) and len(ex.lrs) == len(ex.memory_counts) == ex.num_batches
    assert all(m is not None and m.dtype == bool for m in ex.masks)  # STAMP reports its filter
    import torch

    end = ex.batch_slice(1).stop
    y, p, s = (torch.from_numpy(a) for a in (ex.labels[:end], ex.predictions[:end], ex.scores[:end].astype(np.float64)))
    assert ex.running["acc"][1] == pytest.approx(metrics.accuracy(p, y))
    assert ex.running["auroc"][1] == pytest.approx(metrics.auroc(s, y < 0))
    with pytest.raises(IndexError, match="outside the stream"):
        ex.batch_slice(ex.num_batches)


def test_the_view_the_slider_and_the_headless_summary(stamp_run) -> None:
    fig = stamp_run.draw(2)
    assert "batch 3 of 4" in fig._suptitle.get_text()
    plt.close(fig)
    widget = stamp_run.widget()
    slider = widget.children[0]
    caption, picture = widget.children[1], widget.children[2]
    assert caption.value.startswith("batch 1 of 4:")
    first_picture = bytes(picture.value)
    assert first_picture.startswith(b"\x89PNG")
    slider.value = 4  # what a reader does: the stored figure and its caption are redrawn for batch 4
    assert (slider.min, slider.max) == (1, stamp_run.num_batches)
    mask = stamp_run.masks[3]
    last = stamp_run.batch_slice(3)
    assert caption.value.startswith(f"batch 4 of 4: {int(mask.sum())} of {last.stop - last.start} passed")
    assert f"H {stamp_run.running['h'][3]:.1f}" in caption.value
    assert bytes(picture.value).startswith(b"\x89PNG") and bytes(picture.value) != first_picture
    summary = show(stamp_run)  # no kernel here: the static summary
    assert isinstance(summary, plt.Figure) and "static summary" in summary._suptitle.get_text()
    plt.close("all")


def test_a_method_without_a_filter_has_no_masks(digits_model) -> None:
    ex = stamplib.explore("tent", context=stamplib.RunContext.build(), max_id=64)
    assert ex.masks == [None, None] and ex.memory_counts == [None, None]
    plt.close(ex.draw(0))


def test_hyperparameters_from_a_notebook_parameter() -> None:
    from stamplib.explorer import parse_hyperparameters

    assert parse_hyperparameters("alpha:0.4, num_views:1,view_kind:crop_flip") == {
        "alpha": 0.4, "num_views": 1, "view_kind": "crop_flip"}
    assert parse_hyperparameters("") == {}
    with pytest.raises(ValueError, match="NAME:VALUE"):
        parse_hyperparameters("alpha=0.4")


@pytest.mark.parametrize("name", methods.available())
def test_every_method_explores_the_smoke_stream(name: str, digits_model) -> None:
    # built as the runner builds it: source data for EATA, OWTTT
    ex = stamplib.explore(name, context=stamplib.RunContext.build(), profile="smoke")
    assert ex.num_batches == 2 and len(ex.masks) == len(ex.lrs) == len(ex.memory_counts) == 2
    reports = methods.method_class(name).reports_trace  # the reporting methods give a step size and a filter
    assert np.isfinite(ex.lrs).all() if reports else np.isnan(ex.lrs).all()
    assert all(m is not None for m in ex.masks) == reports
    plt.close(ex.draw(1))
