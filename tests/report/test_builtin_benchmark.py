"""The built-in benchmark's page and headline figure (stamplib.report.builtin_benchmark), from
made-up quick-run records beside the committed reference run."""

from __future__ import annotations

from pathlib import Path

import pytest

from stamplib.data import builtin_cifar10
from stamplib.evaluation.store import ResultsStore
from stamplib.experiments import plans
from stamplib.report import builtin_benchmark as B
from stamplib.report.reference_run import PAPER_METHODS

REPO = Path(__file__).resolve().parents[2]
REFERENCE = ResultsStore(REPO / "results" / "reference")

#: Made-up H per method: the paper's order in (a) except STAMP second, behind CoTTA.
H = {"stamp": 70.0, "cotta": 72.0, "rotta": 65.0, "bn_stats": 60.0, "eata": 59.0, "sar": 58.0, "source": 40.0,
     "sotta": 50.0, "tent": 45.0, "owttt": 30.0, "unient": 90.0}


def _store(tmp_path: Path) -> ResultsStore:
    store = ResultsStore(tmp_path / "results")
    for notebook in ("02_table1_cifar_outlier_aware", "04_table3_class_split", "05_table4_closed_set"):
        plan = plans.plan(notebook, profile="quick", methods=",".join(H))
        for cell in plan.cells:
            spec, h = cell.spec, H[cell.spec.method]
            per = {c: {"acc": h, "auroc": h, "h": h, "collapsed": False, "seconds": 1.0} for c in spec.corruptions}
            store.put({"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per,
                       "mean": {"acc": h, "auroc": h, "h": h}, "collapsed": [], "seconds": 1.0})
    return store


def test_the_tables_read_the_quick_runs_cells_of_the_three_settings(tmp_path: Path) -> None:
    tables = B.tables(_store(tmp_path))
    assert set(tables) == {"a", "b", "c"}
    a = tables["a"].set_index("method")
    assert a.loc["stamp", "H ours"] == 70.0 and a.loc["stamp", "H paper"] == 80.1
    assert "H Δ" not in tables["a"].columns  # another benchmark: no difference of numbers
    assert tables["c"].set_index("method").loc["cotta", "ACC ours"] == 72.0


def test_agreement_ranks_the_papers_ten_against_the_paper_and_the_reference_run(tmp_path: Path) -> None:
    ours = B.tables(_store(tmp_path))
    agree = B.agreement(ours, {}).set_index("metric")
    a = agree.iloc[0]
    assert a["methods"] == len(PAPER_METHODS)  # UniEnt, which the paper lacks, takes no part
    assert (a["STAMP: ours"], a["STAMP: paper"]) == (2, 1)
    assert -1.0 <= a["τ_b vs paper"] <= 1.0 and a["τ_b vs paper"] < 1.0
    assert a["STAMP: reference run"] is None  # no reference tables given
    lead = B.stamp_lead(ours)
    assert lead[0].startswith("- (a) + Noise outliers: STAMP does not lead (rank 2) among the paper's ten by H: "
                              "STAMP 70.0 (ACC 70.0, AUROC 70.0) against CoTTA 72.0")


def test_the_block_replaces_only_its_part_of_the_page(tmp_path: Path) -> None:
    store = _store(tmp_path)
    page = tmp_path / "page.md"
    page.write_text(f"# title\n\n{B.BEGIN}\nold\n{B.END}\n\nhand-written analysis\n")
    written = B.render(store, directory=tmp_path / "figures", page=page, reference_store=REFERENCE)
    assert [p.name for p in written] == ["builtin_benchmark.png", "builtin_benchmark.svg", "page.md"]
    text = page.read_text()
    assert text.startswith("# title\n\n" + B.BEGIN) and text.endswith(B.END + "\n\nhand-written analysis\n")
    assert "old" not in text and "| STAMP | 70.0 / 70.0 / 70.0 |" in text
    assert "τ_b vs reference run" in text  # the committed ResNet-18 records take part
    with pytest.raises(ValueError, match="no generated block"):
        B.replace_block("no markers", "x")


COMMITTED = ResultsStore(REPO / "results" / "builtin_benchmark")


def test_the_page_shows_exactly_what_the_committed_quick_records_give() -> None:
    from stamplib.models import source_model_card

    cards = [source_model_card(name) for name in ("cifar10_builtin", "cifar10_builtin_8_2")]
    expected = B.block(COMMITTED, REFERENCE, cards)
    assert expected in (REPO / B.PAGE).read_text(), (
        "docs/builtin_benchmark.md is stale: run `python -m stamplib benchmark render --results "
        "results/builtin_benchmark --page docs/builtin_benchmark.md`")


def test_the_committed_quick_records_are_every_cell_and_current() -> None:
    from stamplib.evaluation.spec import RunSpec
    from stamplib.evaluation.store import current_config

    wanted = {s.key() for nb in ("02_table1_cifar_outlier_aware", "04_table3_class_split", "05_table4_closed_set")
              for s in plans.plan(nb, profile="quick").specs}
    records = COMMITTED.records()
    assert {r["key"] for r in records} == wanted
    stale = [r["key"] for r in records if r.get("config") != current_config(RunSpec.from_dict(r["spec"]))]
    assert not stale, f"stale records (recompute them with ./run_all.sh and copy them over): {stale}"
    shipped = {r["provenance"]["checkpoint"]["sha256"] for r in records}
    sums = builtin_cifar10.recorded_sums()
    assert shipped == {sums["ResNetTiny_10_jpeg.pt"], sums["ResNetTiny_8_jpeg.pt"]}  # made with the shipped networks


def test_the_readme_says_where_stamp_stands_as_the_committed_records_give() -> None:
    expected = B.summary(B.tables(COMMITTED))
    assert expected in (REPO / "README.md").read_text(), (
        "README's summary is stale: run `python -m stamplib benchmark render --results results/builtin_benchmark "
        "--page docs/builtin_benchmark.md --readme README.md`")
    assert "Among the paper's ten methods, STAMP ranks" in expected
