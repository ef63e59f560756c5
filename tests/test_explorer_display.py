"""The stream explorer shows itself: left as a cell's value it displays the slider (or, without a
front end, the static summary) through Jupyter's display protocol; its text repr is one line;
exploring a cell again reuses the run kept in the results store."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from stamplib import explorer
from tests.support import context_for


def _tiny() -> explorer.StreamExplorer:
    labels = np.array([0, 1, 0, 1, -1, 0, -1, -1] * 2)
    return explorer.StreamExplorer(
        title="tiny", num_classes=2, batch_size=8, images=np.zeros((16, 4, 4, 3), np.uint8),
        labels=labels, predictions=np.maximum(labels, 0), scores=np.linspace(0.0, 1.0, 16),
        masks=[labels[:8] >= 0, labels[8:] >= 0], memory_counts=[[3, 2], [4, 2]], lrs=[0.01, 0.01],
        running={k: np.array([50.0, 60.0]) for k in ("acc", "auroc", "h")},
    )


def test_the_text_repr_is_one_short_line():
    text = repr(_tiny())
    assert "\n" not in text and "array" not in text and len(text) < 200, text
    assert "tiny" in text and "2 batches of 8" in text


def _displayed(monkeypatch, value) -> list:  # noqa: ANN001 - any cell value
    """What IPython's display formatter shows for ``value`` left as a cell's last line."""
    from IPython.core.interactiveshell import InteractiveShell

    shown: list = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    data, _ = InteractiveShell.instance().display_formatter.format(value)
    assert data == {}, "the explorer's own display was not used"  # _ipython_display_ took over
    return shown


def test_a_cell_value_shows_the_slider_in_a_live_kernel(monkeypatch):
    ipywidgets = pytest.importorskip("ipywidgets")
    monkeypatch.setattr(explorer, "_in_a_live_kernel", lambda: True)
    (view,) = _displayed(monkeypatch, _tiny())
    assert isinstance(view, ipywidgets.VBox)
    slider = view.children[0]
    assert isinstance(slider, ipywidgets.IntSlider) and (slider.min, slider.max) == (1, 2)
    before = view.children[2].value
    slider.value = 2  # moving it redraws the picture
    assert view.children[1].value.startswith("batch 2 of 2") and view.children[2].value != before


def test_without_a_front_end_a_cell_value_shows_the_summary_once(monkeypatch):
    monkeypatch.setattr(explorer, "_in_a_live_kernel", lambda: False)
    open_before = set(plt.get_fignums())
    (view,) = _displayed(monkeypatch, _tiny())
    assert isinstance(view, plt.Figure)
    assert set(plt.get_fignums()) == open_before  # closed after display: the inline backend would show it twice


def test_exploring_a_cell_again_reuses_the_kept_run(tmp_path, monkeypatch, digits_model, capsys):
    context = context_for(tmp_path / "results")
    kwargs = dict(context=context, profile="smoke", outlier_set="noise", corruption="gaussian_noise")
    first = explorer.explore("stamp", **kwargs)
    assert "exploring stamp over" in capsys.readouterr().err  # progress while it computes
    assert list((tmp_path / "results" / ".explorer").glob("stamp__*.npz"))

    def no_run(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the method ran again")

    monkeypatch.setattr(explorer, "run_stream", no_run)
    again = explorer.explore("stamp", **kwargs)
    assert "exploring" not in capsys.readouterr().err
    assert np.array_equal(again.predictions, first.predictions) and np.array_equal(again.scores, first.scores)
    assert all((a is None and b is None) or np.array_equal(a, b) for a, b in zip(again.masks, first.masks))
    assert again.memory_counts == first.memory_counts
    assert np.allclose(again.lrs, first.lrs, equal_nan=True)
    assert again.caption(again.num_batches - 1) == first.caption(first.num_batches - 1)
    monkeypatch.undo()
    assert again.method is not None  # the adapted method, rebuilt on demand
    changed = explorer.explore("stamp", alpha=0.3, progress=False, **kwargs)  # another cell: computed
    assert changed.title != first.title
