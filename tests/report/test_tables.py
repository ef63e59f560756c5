"""Records → frames → table files: one frame builder, metric labels, collapsed rows flagged."""

from __future__ import annotations

import pandas as pd

from stamplib.evaluation.record import Record
from stamplib.evaluation.spec import RunSpec
from stamplib.experiments import registry
from stamplib.report import frames, tables


def _record(spec: RunSpec, acc: float = 60.0, collapsed: tuple[str, ...] = ()) -> Record:
    """A record as run() writes it, with made-up numbers."""
    per = {c: {"acc": acc, "auroc": 70.0, "h": 64.6, "collapsed": c in collapsed, "seconds": 1.0,
               "collapse_reason": "non-finite outputs" if c in collapsed else None} for c in spec.corruptions}
    return Record.from_json({"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per, "seconds": 2.0,
                             "mean": {"acc": acc, "auroc": 70.0, "h": 64.6, "collapsed": list(collapsed)},
                             "collapsed": list(collapsed)})


def test_one_builder_for_records_and_plans_with_lower_case_metrics() -> None:
    plan = registry.plan("09_fig_augmentation_averaging", seeds="0,1")
    records = {c.spec.key(): _record(c.spec, acc=50.0 + 10 * c.spec.seed) for c in plan.cells}
    by_plan = frames.plan_frame(plan, records, per_corruption=True)
    by_records = frames.results_frame([records[c.spec.key()] for c in plan.cells], per_corruption=True)
    assert by_plan[list(by_records.columns)].equals(by_records)  # the plan only adds its coordinates
    assert {"acc", "auroc", "h", "variant", "paper_dataset"} <= set(by_plan.columns)
    assert list(by_plan["corruption"][:4]) == ["gaussian_noise", "defocus_blur", "contrast", "mean"]
    averaged = frames.over_seeds(frames.plan_frame(plan, records))
    row = averaged[averaged["variant"] == "K=16"].iloc[0]
    assert row["acc"] == 55.0 and row["acc_std"] == 5.0 and row["n_seeds"] == 2


def test_collapsed_rows_get_daggers_and_keep_their_numbers(tmp_path) -> None:
    spec = RunSpec(method="tent", corruptions=("none", "gaussian_noise"))
    nan_rec = _record(spec, collapsed=("gaussian_noise",))
    zero_rec = _record(spec.with_(method="sar"), collapsed=("none", "gaussian_noise"))
    healthy = _record(spec.with_(method="source"))
    frame = frames.results_frame([nan_rec, zero_rec, healthy])
    assert frame["collapsed"].tolist() == [True, True, False]
    assert frame["collapsed_corruptions"].tolist() == ["gaussian_noise", "none,gaussian_noise", ""]
    md = tables.to_markdown(frame[["method", "acc", "auroc", "h", "collapsed"]])
    rows = md.splitlines()
    assert rows[0] == "| method | ACC | AUROC | H |"  # metric labels; the flag became daggers
    assert rows[2].count("†") == 3 and rows[3].count("†") == 3 and "†" not in rows[4]
    assert rows[-1].startswith("† collapsed:")
    csv_path, md_path, tex_path = tables.save_table(frame, "t", tmp_path / "fig")
    written = pd.read_csv(csv_path)
    assert written["collapsed"].tolist() == [True, True, False] and {"ACC", "AUROC", "H"} <= set(written.columns)
    assert tex_path.read_text().count("$^\\dagger$") == 6 + 1  # 2 rows × 3 metrics + the note
    per = frames.results_frame([nan_rec], per_corruption=True)
    per_md = tables.to_markdown(per).splitlines()
    assert "†" not in per_md[2] and per_md[3].count("†") == 3  # only the collapsed corruption


def test_tables_without_a_collapse_have_no_dagger() -> None:
    spec = RunSpec(method="tent", dataset="digits", outlier_set="noise", seed=0)
    frame = frames.results_frame([Record.from_json({
        "key": spec.key(), "spec": spec.to_dict(), "per_corruption": {}, "collapsed": [],
        "mean": {"acc": 1.0, "auroc": 2.0, "h": 1.5},
    })])
    md = tables.to_markdown(frame)
    assert "†" not in md and md.count("\n") == 3
    assert "$^\\dagger$" not in tables.to_latex(frame)

