"""The course (notebooks 14–17): its lessons plan the paper notebooks' own cells, its
notebooks keep the exercise markup (one check after each exercise, the student's copy with
``solutions`` off), seed spreads say "one seed" where only one exists, and the overview's closing
and lesson 17's comparison with the authors' code read the committed records."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from stamplib.data.corruptions import CORRUPTIONS
from stamplib.evaluation.record import Record
from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import course, plans, registry
from stamplib.experiments.parameters import NotebookParameters
from stamplib.notebook_runner import notebook_parameters, notebooks_dir
from stamplib.teaching import EXERCISES, breaking, overview
from stamplib.teaching.exercises import of_lesson
from stamplib.teaching.records import seed_spread

REPO = Path(__file__).resolve().parents[2]
QUICK_RUN = ResultsStore(REPO / "results" / "builtin_benchmark")
LESSONS = [e.notebook for e in course.LESSONS]


def keys(notebook: str, **params: object) -> set[str]:
    return {s.key() for s in registry.plan(notebook, profile="quick", **params).specs}


def test_the_lessons_are_notebooks_14_to_17_in_file_name_order() -> None:
    assert [nb.stem for nb in sorted(notebooks_dir().glob("1[4-7]_*.ipynb"))] == LESSONS
    # The registry orders every experiment by its notebook's file name (tests/experiments/test_plans.py),
    # so the lessons stand together there, in this order, wherever later notebooks come.
    order = list(registry.EXPERIMENTS)
    first = order.index(LESSONS[0])
    assert order[first:first + len(LESSONS)] == LESSONS


def test_the_lessons_plan_the_paper_notebooks_cells() -> None:
    table1, closed = keys("02_table1_cifar_outlier_aware"), keys("05_table4_closed_set")
    inside, ablation = keys("10_inside_the_stream"), keys("06_table5_ablation")
    views, stress = keys("09_fig_augmentation_averaging"), keys("13_stress_streams")
    adapting = registry.plan(LESSONS[0], profile="quick")
    long = [c.spec for c in adapting.cells if c.variant.startswith(course.LONG_STREAM)]
    assert len(long) == 4 and all(s.stream.schedule == "continual" and s.corruptions == CORRUPTIONS for s in long)
    assert {s.outlier_set for s in long} == {"noise", "none"}
    own = {s.key() for s in long}  # the one stream no paper notebook has
    assert keys(LESSONS[0]) - own <= table1
    assert keys(LESSONS[1]) - own <= table1 | closed | inside and keys(LESSONS[1]) & own == own
    assert keys(LESSONS[2]) <= ablation | table1
    off_path = course.off_path(registry.experiment(LESSONS[2]), NotebookParameters.parse(profile="quick"))
    off_keys = {s.key() for s in off_path.specs}
    assert off_keys <= ablation | views and not off_keys & keys(LESSONS[2])
    assert keys(LESSONS[3]) <= table1 | ablation | stress
    # the path ends at STAMP itself, the cell of Table 1 and of the overview
    assert registry.plan(LESSONS[2], profile="quick").cells[-1].spec.key() in keys("00_walkthrough")


def _cells(notebook: str) -> list[dict]:
    return json.loads((notebooks_dir() / f"{notebook}.ipynb").read_text())["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


@pytest.mark.parametrize("notebook", LESSONS)
def test_each_exercise_is_a_function_to_complete_followed_by_its_check(notebook: str) -> None:
    params = notebook_parameters(notebooks_dir() / f"{notebook}.ipynb")
    assert params["solutions"]["default"] == "False" and params["solutions"]["inferred_type_name"] == "bool"
    cells = _cells(notebook)
    tags = [c["metadata"].get("tags", []) for c in cells]
    found = []
    for i, cell in enumerate(cells):
        if "exercise" not in tags[i]:
            assert "check" not in tags[i] or "exercise" in tags[i - 1], f"{notebook}: a check without its exercise"
            continue
        source = _source(cell)
        name = re.match(r"def (\w+)\(", source).group(1)
        assert source.rstrip().endswith("# YOUR CODE HERE\n    raise NotImplementedError()"), source
        assert "check" in tags[i + 1] and _source(cells[i + 1]).strip() == f'check("{name}", {name}, solutions)'
        namespace: dict = {}
        exec("import torch\n" + source, namespace)  # noqa: S102 - the notebook's own cell
        expected = list(inspect.signature(EXERCISES[name].solution).parameters)
        assert list(inspect.signature(namespace[name]).parameters) == expected, name
        found.append(name)
    assert found == [e.name for e in of_lesson(notebook)] and 2 <= len(found) <= 3


def test_the_overview_points_to_the_lessons_and_names_its_trace() -> None:
    text = "".join(_source(c) for c in _cells("00_walkthrough"))
    assert all(notebook in text for notebook in LESSONS)
    assert '"STAMP, CoTTA-style"' in text and "overview.closing(" in text


def _record(spec, h: float) -> Record:
    per = {c: {"acc": h, "auroc": h, "h": h, "collapsed": False} for c in spec.corruptions}
    return Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per,
                             "mean": {"acc": h, "auroc": h, "h": h}, "collapsed": [], "seconds": 1.0})


def test_a_seed_spread_shows_the_seeds_that_exist_and_says_one_seed_otherwise(tmp_path: Path) -> None:
    spec = registry.plan("02_table1_cifar_outlier_aware", profile="quick", methods="stamp").specs[0]
    run, committed = ResultsStore(tmp_path / "run"), ResultsStore(tmp_path / "committed")
    run.put(_record(spec, 60.0))
    stores = [("run", run), ("committed", committed)]
    assert seed_spread(spec, stores).text() == "60.0 (one seed)"
    committed.put(_record(spec, 99.0))  # the run's own record wins
    committed.put(_record(spec.with_(seed=1), 70.0))
    committed.put(_record(spec.with_(seed=2), 65.0))
    spread = seed_spread(spec, stores)
    assert spread.values == {0: 60.0, 1: 70.0, 2: 65.0} and spread.sources == {0: "run", 1: "committed", 2: "committed"}
    assert spread.text() == "65.0 (60.0–70.0 over seeds 0, 1, 2)"
    assert seed_spread(spec.with_(method="tent"), stores).text() == "—"


def test_the_overviews_closing_explains_the_committed_quick_run(tmp_path: Path) -> None:
    plan = registry.plan("00_walkthrough", profile="quick")
    records = {s.key(): r for s in plan.specs if (r := QUICK_RUN.get(s)) is not None}
    assert len(records) == len(plan.specs)
    text = overview.closing(plan, records, tmp_path / "empty")
    assert "**Why STAMP's contrast bar is the lowest.**" in text and "samples per batch of 64 pass its filters" in text
    assert re.search(r"(one seed per method|over seeds 0, 1, 2)", text)
    assert re.search(r"reference run gives STAMP an H of [\d.]+ / [\d.]+ / [\d.]+ over seeds 0, 1, 2", text)


def test_lesson_17_compares_the_committed_stamp_record_with_the_authors_code() -> None:
    plan = registry.plan(LESSONS[3], profile="quick")
    found = breaking.stamp_records(plan, {s.key(): r for s in plan.specs if (r := QUICK_RUN.get(s)) is not None})
    text = breaking.authors_code_text(plan, found, "contrast")
    assert "16.8 / 52.6 / 25.5" in text
    gap = float(re.search(r"within ([\d.]+) points", text).group(1))
    assert gap <= 0.5
    smoke = registry.plan(LESSONS[3], profile="smoke")
    assert "run this notebook in the quick profile" in breaking.authors_code_text(smoke, found, "contrast")
    assert breaking.worst_corruption(found["STAMP"]) == "contrast"
    with pytest.raises(ValueError, match="corruption: 'fog'"):
        breaking.worst_corruption(found["STAMP"], "fog")


def test_lesson_17s_harder_streams_are_the_cells_its_plan_filled_with_seeds() -> None:
    """Issue 52: the notebook planned notebook 13's cells again from its raw parameters (no seeds,
    so no cell); the section now cuts them from the lesson's plan."""
    plan = registry.plan(LESSONS[3], profile="quick")
    harder = course.harder_streams(plan)
    stress = {c.spec.key() for c in registry.plan("13_stress_streams", profile="quick").cells}
    assert harder.cells and {c.spec.key() for c in harder.cells} <= stress
    assert {c.variant.partition("=")[0] for c in harder.cells} == set(plans.PAPER_STREAM)
    assert {c.spec.method for c in harder.cells} == set(course.STRESS_METHODS)
    assert len(harder.cells) == len(plan.cells) - 2  # all but STAMP and STAMP without self-weights
    with pytest.raises(ValueError, match="fills the default seeds"):
        course.plan_when_it_breaks(plan.experiment, NotebookParameters.parse(profile="quick"))


# ------------------------------------------------------------------ sentences follow the numbers


def _path(tent: dict, views: dict) -> pd.DataFrame:
    from stamplib.teaching import piece_by_piece
    return pd.DataFrame([{"step": piece_by_piece.STEPS[0].name, **tent}, {"step": piece_by_piece.STEPS[1].name,
                                                                          **views}])


@pytest.mark.parametrize("auroc, words", [(28.9, ("AUROC falls from 57.9 to 28.9", "a worse OOD score")),
                                          (70.0, ("AUROC rises from 57.9 to 70.0", "a better OOD score"))])
def test_lesson_16_says_what_views_averaging_did_to_the_ood_score(auroc: float, words: tuple[str, ...]) -> None:
    from stamplib.teaching import piece_by_piece
    text = piece_by_piece.step_text(_path({"ACC": 60.0, "AUROC": 57.9, "H": 58.9}, {"ACC": 62.0, "AUROC": auroc,
                                                                                    "H": 40.0}),
                                    "+ views averaging")
    assert all(w in text for w in words) and "ACC rises" in text and "H falls" in text, text


def test_lesson_14_reads_the_direction_of_the_variance_and_the_drift_from_the_numbers() -> None:
    from stamplib.teaching import adapting
    frame = pd.DataFrame([{"stream": s, "layer": i, "mean_shift": shift * (i + 1), "variance_ratio": ratio}
                          for s, shift, ratio in (("clean", 0.1, 0.49), ("gaussian_noise", 0.5, 0.65), ("contrast", 0.3,
                                                                                                        0.2))
                          for i in range(3)])
    text = adapting.batch_norm_shift_text(frame)
    assert "gaussian noise: mean shifted by up to 1.50 σ (layer 2), variance × 0.65 (layer 0, below training)" in text
    assert "gaussian noise shifts the mean more (1.50 σ against 0.30 σ) and leaves the variance nearer to" in text
    assert "contrast shifts the mean more (0.90 σ against 0.30 σ) and leaves the variance farther from" in text
    assert "raises" not in text
    assert adapting.drift_verdict(0.27, 0.14).startswith("**Tent drifts towards one class here, without collapsing**")
    assert adapting.drift_verdict(0.62, 0.14).startswith("**Tent collapses here**")
    assert adapting.drift_verdict(0.15, 0.14).startswith("**Tent does not drift here**")


def test_lesson_15_says_where_stamp_stands_against_bn_stats_in_the_committed_quick_run() -> None:
    from stamplib.teaching import outliers
    plan = registry.plan(LESSONS[1], profile="quick")
    records = {s.key(): r for s in plan.specs if (r := QUICK_RUN.get(s)) is not None}
    stamp, bn = (records[registry.plan("02_table1_cifar_outlier_aware", profile="quick",
                                       methods=m).specs[0].key()].mean.h
                 for m in ("stamp", "bn_stats"))
    text = outliers.h_plane_text(plan, records)
    assert f"STAMP's mean H ({stamp:.1f}) is {'above' if stamp > bn else 'below'} BN Stats' ({bn:.1f})" in text, text
    assert ("pulled down by" in text) == (stamp < bn)


def test_lesson_14_and_16_say_lifts_and_gain_only_where_the_numbers_rise() -> None:
    from stamplib.teaching import adapting, piece_by_piece

    def comparison(source: float, bn: float) -> pd.DataFrame:
        return pd.DataFrame([{"method": m, "corruption": "mean", "acc": v, "auroc": 60.0}
                             for m, v in (("source", source), ("bn_stats", bn), ("tent", 50.0))])

    assert "(BN Stats) lifts that to 70.0 %" in adapting.comparison_text(comparison(40.0, 70.0))
    assert "(BN Stats) takes that to 30.0 %" in adapting.comparison_text(comparison(40.0, 30.0))
    falling = _path({"ACC": 60.0, "AUROC": 57.9, "H": 58.9}, {"ACC": 50.0, "AUROC": 28.9, "H": 40.0})
    assert "No step raises the mean H here." in piece_by_piece.path_text(falling)
    rising = _path({"ACC": 60.0, "AUROC": 57.9, "H": 40.0}, {"ACC": 50.0, "AUROC": 28.9, "H": 58.9})
    assert "The largest single gain: + views averaging (+18.9)." in piece_by_piece.path_text(rising)


def test_lesson_15_calls_the_long_stream_collapsed_only_as_lesson_14_does() -> None:
    """Lesson 14's verdict says "drifts, without collapsing" below half the predictions; lesson 15's
    sentence on the same stream uses the same rule."""
    from stamplib.teaching import outliers

    def text(share: float) -> str:
        scores = pd.DataFrame([{"Method": "Tent", "batch": b, "score_known": 1.0,
                                "score_outliers": 0.5} for b in range(3)])
        shares = pd.DataFrame([{"Method": "Tent", "stream": course.LONG_STREAM, "top_class_share": share,
                                "outliers_top_share": 0.8},
                               {"Method": "Tent", "stream": course.LONG_STREAM_CLOSED, "top_class_share": 0.15,
                                "outliers_top_share": 0.0}])
        return outliers.long_stream_text(scores, shares)

    assert "drifts, without collapsing" in text(0.3) and "collapses" not in text(0.3).replace("without collapsing", "")
    assert "collapses onto one class" in text(0.6)
    assert text(0.16).endswith("%.")


def test_lesson_16_quotes_the_step_size_of_the_last_step_a_stream_takes_and_no_nan_for_tent() -> None:
    from stamplib.methods.stamp import cosine_step_size
    from stamplib.teaching import piece_by_piece
    from stamplib.teaching.records import default_stores

    plan = registry.plan(LESSONS[2], profile="quick")
    records = {s.key(): r for s in plan.specs if (r := QUICK_RUN.get(s)) is not None}
    stamp = next(c.spec for c in reversed(plan.cells) if c.spec.method == "stamp")
    batches = max(len(t.n_passed) for t in records[stamp.key()].trace.values())
    last = cosine_step_size(stamp.config.lr, batches - 1, stamp.config.period, periodic=True)
    text = piece_by_piece.schedule_text(plan, records)
    assert f"to {last:.4g} at the last step it can take" in text, text
    table = piece_by_piece.path_table(plan, records, default_stores(REPO / "results"))
    tent = table[table["step"] == "Tent"].iloc[0]
    assert all(tent[f"paper {m}"] == piece_by_piece.NOT_IN_TABLE5 for m in ("ACC", "AUROC", "H"))
    assert {"H lowest seed", "H highest seed"} <= set(table.columns)


# ------------------------------------------------------------------ tables and figures say what they show


def test_lesson_17s_harder_streams_table_labels_what_each_column_is_taken_over() -> None:
    """The batch-size streams run on gaussian noise alone, the others over every corruption: the
    table's columns say which, from the plan's cells."""
    plan = course.harder_streams(registry.plan(LESSONS[3], profile="quick"))
    streams = [(axis, s) for axis, values in ((plans.BATCH_AXIS, ("16", "64")), (plans.LABEL_AXIS, ("none", "sorted")),
                                               (plans.DOMAIN_AXIS, ("separate", "mixed"))) for s in values]
    table = pd.DataFrame([{"method": m, "axis": axis, "stream": s, "H": 50.0}
                          for m in ("Source", "STAMP") for axis, s in streams])
    wide = breaking.harder_streams_wide(plan, table)
    corruptions = len(next(c for c in plan.cells if c.variant.startswith(plans.LABEL_AXIS)).spec.corruptions)
    assert corruptions > 1
    assert list(wide.columns) == [("gaussian noise only", "batch size=16"), ("gaussian noise only", "batch size=64"),
                                  *[(f"mean over {corruptions} corruptions", f"{axis}={s}") for axis, s in streams[2:]]]
    assert wide.columns.names == ["H on", "stream"] and list(wide.index) == ["Source", "STAMP"]
    notebook = json.loads((notebooks_dir() / f"{LESSONS[3]}.ipynb").read_text())
    source = "".join("".join(c["source"]) for c in notebook["cells"])
    assert "breaking.harder_streams_wide(stress_plan, harder" in source


def test_the_overviews_table_names_methods_as_the_lessons_do() -> None:
    from stamplib.report import walkthrough

    frame = pd.DataFrame(
        [
            {"method": m, "corruption": c, "acc": 50.0, "auroc": 60.0, "h": 54.5, "collapsed": False}
            for m in ("source", "bn_stats", "tent", "stamp")
            for c in ("gaussian_noise", "mean")
        ]
    )
    table = walkthrough.comparison_table(frame)
    assert list(table["Method"]) == ["Source", "BN Stats", "Tent", "STAMP"]
    assert list(table.columns) == ["Method", "ACC", "AUROC", "H", "collapsed"]
    notebook = json.loads((notebooks_dir() / "00_walkthrough.ipynb").read_text())
    code = "".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
    assert "walkthrough.comparison_table(frame)" in code and '"method", "acc"' not in code


def test_every_bracket_of_the_notebooks_prose_is_closed_once() -> None:
    """Every lesson's header said "(… (20 s, measured on a shared machine))": one bracket too many."""
    unbalanced = []
    for path in sorted(notebooks_dir().glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            prose = re.sub(r"`[^`]*`", "", _source(cell))  # code spans may hold anything
            if cell["cell_type"] == "markdown" and prose.count("(") != prose.count(")"):
                unbalanced.append(f"{path.name}, cell {i}: {prose.count('(')} '(' and {prose.count(')')} ')'")
    assert not unbalanced


def _markdown(notebook: str) -> str:
    nb = json.loads((notebooks_dir() / f"{notebook}.ipynb").read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def test_lesson_16s_self_weighting_text_follows_the_authors_code_and_the_gradient() -> None:
    """Lesson 16 said the loss "can also lower the entropy of a sample by raising its weight" (issue
    83); through w = softmax(−H), minimising it raises the entropy of the samples above 1 + H̄. The
    text now says what the authors' code does (no detach) and the gradient that follows: both checked
    here, against the spec of the authors' code and against autograd on STAMP's own loss."""
    import torch

    from stamplib.teaching.piece_by_piece import stamp_for_checks

    spec = " ".join((REPO / "docs" / "spec" / "stamp.md").read_text().split())
    assert "weights are not detached: the gradient also flows through them" in spec  # the authors' adapt(), §4.4.4
    text = _markdown("16_course_stamp_piece_by_piece")
    assert "by raising its weight" not in text
    assert "∂L/∂H_j = (64/N) · w_j · (1 − H_j + H̄)" in text and "*raises* it for those above" in text
    assert "not a detached copy" in text and "§4.4" in text

    scale, entropy = 64, torch.tensor([0.05, 0.2, 0.4, 1.9, 2.2], dtype=torch.float64, requires_grad=True)
    weights = torch.softmax(-entropy, 0)
    (grad,) = torch.autograd.grad((entropy * scale * weights).mean(), entropy)
    mean = float((weights * entropy).sum().detach())
    formula = scale / len(entropy) * weights * (1 - entropy + mean)
    assert torch.allclose(grad, formula.detach())
    above = entropy.detach() > 1 + mean
    assert above.any() and bool((grad[above] < 0).all()) and bool((grad[~above] > 0).all())  # raised, lowered

    # STAMP's own loss keeps the weights' gradient: its gradient is this one, not the detached one's
    stamp, logits = stamp_for_checks(5, 0), torch.randn(6, 5, dtype=torch.float64) * 3
    given = logits.clone().requires_grad_(True)
    (ours,) = torch.autograd.grad(stamp.loss(given, scale), given)
    kept, detached = (logits.clone().requires_grad_(True) for _ in range(2))
    h = -(torch.log_softmax(kept, 1).exp() * torch.log_softmax(kept, 1)).sum(1)
    (through,) = torch.autograd.grad((h * scale * torch.softmax(-h, 0)).mean(), kept)
    hd = -(torch.log_softmax(detached, 1).exp() * torch.log_softmax(detached, 1)).sum(1)
    (static,) = torch.autograd.grad((hd * scale * torch.softmax(-hd, 0).detach()).mean(), detached)
    assert torch.allclose(ours.double(), through, atol=1e-6) and not torch.allclose(through, static, atol=1e-6)


def test_lesson_16s_changes_are_the_differences_of_the_numbers_shown() -> None:
    """It wrote "+0.0" beside a table that shows 44.4 → 44.5 (issue 83)."""
    from stamplib.teaching import piece_by_piece

    steps = _path({"ACC": 60.04, "AUROC": 57.94, "H": 44.44}, {"ACC": 60.06, "AUROC": 57.96, "H": 44.46})
    assert "+ views averaging +0.1" in piece_by_piece.path_text(steps)
    text = piece_by_piece.step_text(steps, "+ views averaging")
    assert "H rises from 44.4 to 44.5 (+0.1)" in text and "ACC rises from 60.0 to 60.1 (+0.1)" in text, text
    same = _path({"ACC": 60.0, "AUROC": 57.91, "H": 44.41}, {"ACC": 60.0, "AUROC": 57.94, "H": 44.44})
    assert "H stays at 44.4" in piece_by_piece.step_text(same, "+ views averaging")
