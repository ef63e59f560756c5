"""A benchmark's page block and headline figure (stamplib.evidence.pages.benchmark_block over
stamplib.evidence.tables): one template for every benchmark, checked on made-up quick-run records."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from stamplib.evaluation.record import Record
from stamplib.evaluation.store import ResultsStore
from stamplib.evidence import benchmarks, judge, pages, tables
from stamplib.evidence.ledger import Arm
from stamplib.experiments import plans
from stamplib.methods import PAPER_ORDER

#: Made-up H per method and seed: the paper's order in (a) except STAMP, which CoTTA beats under
#: seeds 0 and 1 and which beats CoTTA under seed 2 (its mean, 71.0, is below CoTTA's 71.3).
H = {"stamp": (70.0, 68.0, 75.0), "cotta": (72.0, 70.0, 72.0), "rotta": (65.0,) * 3, "bn_stats": (60.0,) * 3,
     "eata": (59.0,) * 3, "sar": (58.0,) * 3, "source": (40.0,) * 3, "sotta": (50.0,) * 3, "tent": (45.0,) * 3,
     "owttt": (30.0,) * 3, "unient": (90.0,) * 3}


def _store(root: Path, benchmark: benchmarks.Benchmark, h: dict[str, tuple[float, ...]] = H) -> ResultsStore:
    """Records of the headline tables at ``benchmark``'s scale: each method's value under each seed."""
    store = ResultsStore(root)
    for experiment, _ in tables.SETTINGS.values():
        for cell in tables.plan(benchmark, experiment, methods=",".join(h)).cells:
            spec = cell.spec
            if spec.seed >= len(h[spec.method]):
                continue
            value = h[spec.method][spec.seed]
            per = {c: {"acc": value, "auroc": value, "h": value, "collapsed": False, "seconds": 1.0}
                   for c in spec.corruptions}
            store.put(Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per,
                                        "mean": {"acc": value, "auroc": value, "h": value}, "collapsed": [],
                                        "seconds": 1.0, "device": "cpu", "versions": {"torch": "2.14.1"}}))
    return store


def _judged(store: ResultsStore, benchmark: benchmarks.Benchmark) -> pages.Judged:
    snapshot = pages.RecordsSnapshot(store.root)
    return pages.Judged(benchmark, snapshot, tuple(judge.judge_benchmark(benchmark, snapshot)), ())


def test_the_tables_read_the_three_settings_over_the_seeds(tmp_path: Path) -> None:
    found = tables.setting_tables(benchmarks.BUILTIN, _store(tmp_path, benchmarks.BUILTIN).records_by_key())
    assert set(found) == {"a", "b", "c"}
    a = found["a"].set_index("method")
    assert a.loc["stamp", "H ours"] == 71.0 and a.loc["stamp", "H paper"] == 80.1
    assert a.loc["stamp", "H seeds"] == {0: 70.0, 1: 68.0, 2: 75.0}
    assert "H Δ" not in found["a"].columns and "ACC Δ" not in found["c"].columns  # another benchmark than the paper's
    real = tables.setting_tables(benchmarks.REFERENCE, _store(tmp_path / "real", benchmarks.REFERENCE).records_by_key())
    assert real["a"].set_index("method").loc["stamp", "H Δ"] == pytest.approx(71.0 - 80.1)


def test_one_template_renders_either_benchmark(tmp_path: Path) -> None:
    built = _judged(_store(tmp_path / "b", benchmarks.BUILTIN), benchmarks.BUILTIN)
    real = _judged(_store(tmp_path / "r", benchmarks.REFERENCE), benchmarks.REFERENCE)
    for mine, other in ((built, real), (real, built)):
        block = pages.benchmark_block(mine, other)
        assert f"![{mine.benchmark.title}: ours against the paper](../figures/{mine.benchmark.figure}.png)" in block
        # Both benchmarks' three-corruption designs read the quick cells this store holds.
        assert "**Does STAMP lead the paper's ten?**" in block
        for title in tables.TITLES.values():
            assert f"### {title}" in block
        assert f"τ_b vs the {other.benchmark.title}" in block
        assert "| (a) CIFAR-10-C + Noise outliers | H | 1st–2nd (seeds 0–2) | 1 |" in block
        assert "Computed on cpu with torch 2.14.1" in block
    assert "| STAMP | 80.1 | 71.0 (68.0–75.0) | -9.1 |" not in pages.benchmark_block(built, real)
    assert "71.0 (68.0–75.0) | -9.1 |" in pages.benchmark_block(real, built)  # Δ only where the benchmark subtracts
    leads = pages.benchmark_block(real, built)
    assert "- (a) CIFAR-10-C + Noise outliers: *STAMP has the best H-score of the ten methods with Noise outliers*: " \
           "**undecided" in leads and "What drives it: network 0: holds under 1 of 3 seeds" in leads


def test_the_block_replaces_only_its_part_of_the_page(tmp_path: Path) -> None:
    built = _judged(_store(tmp_path, benchmarks.BUILTIN), benchmarks.BUILTIN)
    begin, end = pages.markers(pages.BENCHMARK_BLOCK)
    text = pages.replace_block(f"# title\n\n{begin}\nold\n{end}\n\nhand-written\n", pages.BENCHMARK_BLOCK,
                               pages.benchmark_block(built, None))
    assert text.startswith("# title\n\n" + begin) and text.endswith(end + "\n\nhand-written\n")
    assert "\nold\n" not in text


def test_the_figure_draws_the_seeds_range_as_error_bars(tmp_path: Path) -> None:
    ours = tables.setting_tables(benchmarks.BUILTIN, _store(tmp_path, benchmarks.BUILTIN).records_by_key())
    bars = tables._error_bars(ours["a"], ["cotta", "stamp", "tent"], "H")
    assert bars[:, 1].tolist() == [3.0, 4.0] and bars[0, 0] == pytest.approx(4 / 3)
    assert bars[:, 2].tolist() == [0.0, 0.0]  # Tent's three seeds agree
    fig = tables.headline_figure(benchmarks.BUILTIN, ours, ours, "another")
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "built-in benchmark (mean over seeds, min–max)" in labels and "another (network 0)" in labels
    assert "paper" in labels
    written = tables.write_figure(benchmarks.BUILTIN, ours, tmp_path / "figures")
    assert [p.name for p in written] == ["builtin_benchmark.png", "builtin_benchmark.svg"]


def test_panel_a_shows_the_mean_over_networks_with_a_dot_per_network() -> None:
    from stamplib.methods import PAPER_ORDER

    design = benchmarks.BUILTIN.design("networks")
    by_method = {m: {k: 60.0 + k + (10.0 if m == "stamp" else 0.0) for k in range(5)} for m in PAPER_ORDER}
    ours = {letter: pd.DataFrame() for letter in tables.SETTINGS}
    ours["a"] = pd.DataFrame({"method": list(PAPER_ORDER), "H ours": [62.0] * 10, "H paper": [70.0] * 10})
    fig = tables.headline_figure(benchmarks.BUILTIN, ours, per_network=(design, by_method))
    panel = fig.axes[0]
    heights = [bar.get_height() for bar in panel.patches]
    assert heights == [72.0 if m == "stamp" else 62.0 for m in PAPER_ORDER]  # the mean over networks, not "H ours"
    dots = [line for line in panel.lines if line.get_marker() == "o"]
    assert len(dots) == 10 and all(len(line.get_ydata()) == 5 for line in dots)
    assert "the mean over 5 source networks" in fig._suptitle.get_text()


def test_the_networks_table_gives_each_networks_diagnostic_and_its_order_of_the_ten(tmp_path: Path) -> None:
    """Three made-up reference networks: τ_b of the ten against Table 1a per network, and Source's
    AUROC with Noise outliers from the records."""
    from stamplib.evidence import networks

    design = benchmarks.REFERENCE.design("networks")
    store = ResultsStore(tmp_path)
    order = {m: 50.0 + k for k, m in enumerate(PAPER_ORDER)}
    for replicate in design.replicates:
        for method in PAPER_ORDER[:7] if replicate.network == 2 else PAPER_ORDER:  # network 2 is still short of three
            spec = benchmarks.spec(Arm(plans.TABLE1.notebook, method), design, replicate)
            value = order[method] if replicate.network != 1 else 100.0 - order[method]  # network 1 reverses it
            per = {c: {"acc": value, "auroc": value, "h": value} for c in spec.corruptions}
            store.put(Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per,
                                        "mean": {"acc": value, "auroc": value, "h": value}}))
    names = ("ResNet18_10_jpeg", "ResNet18_10_jpeg_seed1", "ResNet18_10_jpeg_seed2")
    diagnostics = tuple(networks.NetworkDiagnostic("cifar10_jpeg", k, name, "0" * 64, 0.87, 2000, 2000, 70.0, "truck",
                                                   0.9, 0.4, 0.8, 0.9) for k, name in enumerate(names))
    j = pages.Judged(benchmarks.REFERENCE, pages.RecordsSnapshot(tmp_path), (), diagnostics)
    table = pages.networks_table([j])
    rows = [line for line in table.splitlines() if line.startswith("| reference")]
    assert len(rows) == 3 and "`ResNet18_10_jpeg_seed1`" in rows[1] and "90 % \"truck\"" in rows[0]
    taus = [row.split(" | ")[-2] for row in rows]
    assert taus[1].startswith("-") and not taus[0].startswith("-")  # the reversed network disagrees with Table 1a
    assert taus[2] == "— (7 of 10 methods so far)"  # no τ over fewer than the ten
    assert rows[0].split(" | ")[3] == "50.0"  # Source's AUROC with Noise outliers, from its record
