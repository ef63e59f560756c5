"""Notebook 12's table, ranking text and figure, from records made up so that the answer is known."""

from __future__ import annotations

import matplotlib.pyplot as plt

from stamplib.evaluation.record import Record
from stamplib.experiments import plans, registry
from stamplib.report import realistic

#: method → (H under the paper's protocol, H under the realistic one, C(g))
MADE_UP = {"source": (40.0, 40.0, 1), "tent": (60.0, 58.0, 3), "stamp": (80.0, 50.0, 28)}


def _records() -> tuple[registry.Plan, dict]:
    plan = registry.plan("12_realistic_stream", profile="smoke", methods="source,tent,stamp")
    records = {}
    for cell in plan.cells:
        paper_h, realistic_h, speed = MADE_UP[cell.spec.method]
        is_realistic = cell.variant == plans.REALISTIC_PROTOCOL
        h = realistic_h if is_realistic else paper_h
        record = {"key": cell.spec.key(), "spec": cell.spec.to_dict(), "per_corruption": {},
                  "mean": {"acc": h + 1.0, "auroc": h - 1.0, "h": h}, "seconds": 1.0}
        if is_realistic:
            record["realistic"] = {"relative_speed": speed, "measured": True, "adapted_batches": 10 // speed,
                                   "batches": 10}
        records[cell.spec.key()] = Record.from_json(record)
    return plan, records


def test_the_table_puts_both_protocols_side_by_side_with_c_g_and_ranks() -> None:
    plan, records = _records()
    table = realistic.protocol_table(plan, records).set_index("method")
    assert list(table.index) == ["Source", "Tent", "STAMP"]
    assert table.loc["STAMP", "H (paper)"] == 80.0 and table.loc["STAMP", "H (realistic)"] == 50.0
    assert table.loc["STAMP", "ΔH"] == -30.0 and table.loc["STAMP", "C(g)"] == 28
    assert table.loc["Tent", "adapted %"] == 30.0
    assert list(table["rank (paper)"]) == [3, 2, 1] and list(table["rank (realistic)"]) == [3, 1, 2]


def test_the_ranking_text_names_the_methods_that_move_with_their_numbers() -> None:
    plan, records = _records()
    text = realistic.ranking_changes(realistic.protocol_table(plan, records))
    assert "best H under the paper's protocol STAMP (80.0), under the realistic one Tent (58.0)" in text
    assert "2 methods change rank" in text
    assert "STAMP 1st → 2nd (H 80.0 → 50.0, C(g) = 28)" in text and "Tent 2nd → 1st" in text
    assert "Source" not in text.split("change rank")[1]


def test_a_method_missing_under_one_protocol_is_left_out_of_both_rankings() -> None:
    plan, records = _records()
    stamp_realistic = next(c.spec.key() for c in plan.cells
                           if c.spec.method == "stamp" and c.variant == plans.REALISTIC_PROTOCOL)
    del records[stamp_realistic]
    table = realistic.protocol_table(plan, records).set_index("method")
    assert table["rank (paper)"].isna()["STAMP"] and table["rank (realistic)"].isna()["STAMP"]
    assert list(table["rank (paper)"].dropna()) == [2, 1] and list(table["rank (realistic)"].dropna()) == [2, 1]
    assert "No method changes rank" in realistic.ranking_changes(table.reset_index())


def test_no_records_give_a_table_without_rows_and_a_figure_that_says_so() -> None:
    plan, _ = _records()
    table = realistic.protocol_table(plan, {})
    assert table.empty and "compute the cells first" in realistic.ranking_changes(table)
    plt.close(realistic.plot_h_against_speed(table))


def test_the_figure_has_one_panel_with_a_point_per_method_and_protocol() -> None:
    plan, records = _records()
    fig = realistic.plot_h_against_speed(realistic.protocol_table(plan, records))
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and len(ax.collections) == 2 * len(MADE_UP)
    plt.close(fig)
