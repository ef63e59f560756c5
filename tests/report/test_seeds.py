"""Numbers over seeds and claims decided on paired seeds (stamplib.report.seeds, issue 41), and one
colour per method in every figure (stamplib.report.palette)."""

from __future__ import annotations

import colorsys
import math

import matplotlib.colors as mcolors
import pandas as pd
import pytest

from stamplib import methods
from stamplib.evaluation.record import Record
from stamplib.report import palette, seeds, stress


def test_a_spread_is_the_mean_with_the_smallest_and_largest_seed() -> None:
    spread = seeds.Spread.of({0: 63.7, 1: 59.6, 2: 71.7, 3: math.nan})
    assert spread.seeds == (0, 1, 2) and spread.text() == "65.0 (59.6–71.7)"
    assert seeds.Spread.of({0: 63.71}).text() == "63.7"  # one seed: its number alone
    assert seeds.Spread.of({0: -13.2, 1: -0.5, 2: -12.1}).text() == "-8.6 (-13.2 to -0.5)"
    assert seeds.Spread.of({}).text() == "—"
    assert [seeds.seeds_text(s) for s in ((0,), (0, 1, 2), (0, 2), (0, 1), (1, 3, 4))] == [
        "seed 0", "seeds 0–2", "seeds 0 and 2", "seeds 0 and 1", "seeds 1, 3 and 4"]


def test_ranks_pair_the_seeds_every_method_has() -> None:
    values = {"stamp": {0: 70.0, 1: 68.0, 2: 75.0}, "cotta": {0: 72.0, 1: 70.0, 2: 72.0},
              "tent": {0: 60.0, 1: 71.0, 2: 40.0}, "source": {0: 40.0, 1: 40.0}}  # Source lacks seed 2
    assert seeds.paired(*values.values()) == (0, 1)
    assert seeds.ranks(values, "stamp") == {0: 2, 1: 3} and seeds.rank_text({0: 2, 1: 3}) == "2nd–3rd"
    assert seeds.rank_text({0: 1, 1: 1}) == "1st"


def test_kendalls_tau_per_seed_with_its_range() -> None:
    ours = {"a": {0: 3.0, 1: 1.0}, "b": {0: 2.0, 1: 2.0}, "c": {0: 1.0, 1: 3.0}}
    tau = seeds.tau_by_seed(ours, {"a": 30.0, "b": 20.0, "c": 10.0})
    assert tau == {0: 1.0, 1: -1.0}
    assert seeds.tau_text(tau) == "+1.00 / -1.00 (range -1.00 to +1.00)" and seeds.tau_text({0: 0.26}) == "+0.26"


def test_a_signed_number_always_has_its_sign_and_a_rounded_zero_is_never_negative() -> None:
    assert [seeds.signed(v, 1) for v in (1.25, -0.5, -0.04, 0.0)] == ["+1.2", "-0.5", "+0.0", "+0.0"]
    assert seeds.signed(-0.004, 2) == "+0.00" and seeds.signed(2.0, 2) == "+2.00"


def test_table_values_read_a_tables_seeds_or_its_one_number() -> None:
    table = pd.DataFrame({"method": ["stamp", "tent"], "H ours": [65.0, 60.0],
                          "H seeds": [{0: 63.7, 1: 59.6, 2: 71.7}, {0: 60.0, 1: math.nan}]})
    assert seeds.table_values(table, "H") == {"stamp": {0: 63.7, 1: 59.6, 2: 71.7}, "tent": {0: 60.0}}
    assert seeds.table_values(table.drop(columns="H seeds"), "H", ["tent"]) == {"tent": {0: 60.0}}


def _hue(colour: str) -> tuple[float, float, float]:
    return colorsys.rgb_to_hls(*mcolors.to_rgb(colour))


def test_stamp_alone_is_red_and_every_method_has_a_colour_of_its_own() -> None:
    colours = palette.method_colours(methods.TABLE_ORDER)
    assert colours["stamp"] == palette.STAMP == mcolors.to_hex("tab:red")
    assert len(set(colours.values())) == len(colours)  # no two methods share a colour
    for method, colour in colours.items():
        if method == "stamp":
            continue
        hue, _, saturation = _hue(colour)
        # no other red or pink (tab:pink is at 318°): hues within 20° of red or past 300°, unless a grey
        assert saturation < 0.15 or 20 / 360 < hue < 300 / 360, (method, colour)
    assert palette.method_colour("STAMP") == palette.STAMP  # figures that carry labels find it too
    outside = palette.method_colours(["stamp", "mine:Method", "theirs:Method"])
    assert outside["mine:Method"] != outside["theirs:Method"] and palette.STAMP not in list(outside.values())[1:]


def test_notebook_13s_figure_draws_stamp_red_and_owttt_apart() -> None:
    table = pd.DataFrame([{"method": m, "axis": "batch size", "stream": s, "ACC": 1.0, "AUROC": 1.0, "H": h, "rank": 1}
                          for m, h in (("STAMP", 60.0), ("OWTTT", 50.0), ("Tent", 40.0)) for s in ("4", "64")])
    fig = stress.plot_axes(table)
    lines = {line.get_label(): mcolors.to_hex(line.get_color()) for line in fig.axes[0].get_lines()}
    assert lines["STAMP"] == palette.STAMP and lines["OWTTT"] == palette.METHOD_COLOURS["owttt"]
    assert len(set(lines.values())) == 3


def test_notebook_13s_figure_is_readable_whoever_drew_its_records() -> None:
    """The figure the walkthrough and notebook 13 draw once the harder streams have records: no
    text under 8 pt and no legend over a point (the section test sees it only when another test
    has stored those records first)."""
    from tests.teaching.test_figures import figure_problems

    table = pd.DataFrame([{"method": m, "axis": a, "stream": s, "ACC": 1.0, "AUROC": 1.0, "H": h, "rank": 1}
                          for m, h in (("STAMP", 60.0), ("OWTTT", 50.0), ("Tent", 40.0))
                          for a, streams in (("batch size", ("4", "64")), ("label shift", ("iid", "sorted")))
                          for s in streams])
    assert figure_problems(stress.plot_axes(table)) == []


def _record(spec, per_corruption: dict[str, float]) -> Record:
    per = {c: {"acc": v, "auroc": v, "h": v, "collapsed": False, "seconds": 1.0}
           for c, v in per_corruption.items() if c in spec.corruptions}
    mean = sum(m["h"] for m in per.values()) / len(per)
    return Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per,
                             "mean": {"acc": mean, "auroc": mean, "h": mean, "collapsed": []}, "seconds": 1.0})


def test_notebook_13_reads_the_paper_batch_on_its_corruption_and_draws_the_paper_streams_spread() -> None:
    from stamplib.experiments import registry

    plan = registry.plan("13_stress_streams", methods="stamp,tent")
    cells = (*plan.cells, *plan.band_cells)
    # gaussian noise differs from the other corruptions, and from seed to seed
    records = {c.spec.key(): _record(c.spec, {"gaussian_noise": 80.0 + 2 * c.spec.seed, "defocus_blur": 40.0,
                                              "contrast": 40.0}) for c in cells}
    table = stress.stress_table(plan, records).set_index(["method", "axis", "stream"])
    assert table.loc[("STAMP", "batch size", "64"), "H"] == 80.0  # notebook 02's cell, on gaussian noise alone
    assert table.loc[("STAMP", "label shift", "none"), "H"] == pytest.approx(160 / 3)  # all three corruptions
    spread = stress.paper_stream_spread(plan, records).set_index(["method", "axis"])
    assert spread.loc[("STAMP", "batch size"), ["H min", "H max"]].tolist() == [80.0, 84.0]
    assert spread.loc[("STAMP", "domains"), ["H min", "H max"]].tolist() == pytest.approx([160 / 3, 164 / 3])
    note = stress.spread_note(stress.paper_stream_spread(plan, records))
    assert note.startswith("batch size=64 (the paper's stream) over seeds 0–2, H mean (min–max): STAMP 82.0 "
                           "(80.0–84.0), Tent 82.0 (80.0–84.0).")
    fig = stress.plot_axes(stress.stress_table(plan, records), spread=stress.paper_stream_spread(plan, records))
    assert len(fig.axes[0].collections) == 2  # a bar per method on the paper's batch
    assert stress.paper_stream_spread(registry.plan("13_stress_streams", methods="stamp", profile="full"), {}).empty
