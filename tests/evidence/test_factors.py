"""What drives STAMP's setting (a), measured on made-up traces and records: the shares its traces
give (Noise among what it adapts on and in its memory, its filter as a Noise detector, its accuracy),
and the driver that names the counterfactual arm restoring its lead, or says that none does."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stamplib.data.corruptions import CORRUPTIONS
from stamplib.evaluation.record import Record, Trace
from stamplib.evaluation.store import ResultsStore
from stamplib.evidence import benchmarks as B
from stamplib.evidence import factors as F
from stamplib.evidence import judge as J
from stamplib.evidence import ledger as C
from stamplib.evidence.benchmarks import Replicate
from stamplib.experiments import plans
from stamplib.methods import PAPER_ORDER

NETWORKS = B.BUILTIN.design("networks")


def _trace(batches: int = 4, noise: int = 3, passed_noise: int = 1, memory: int = 10, memory_noise: int = 3,
           correct: int = 40) -> Trace:
    """Batches of 48 known-class samples and ``noise`` outliers each."""
    return Trace(n_passed=(20,) * batches, passed_outliers=(passed_noise,) * batches, memory_size=(memory,) * batches,
                 memory_outliers=(memory_noise,) * batches, adapted_size=(memory,) * batches,
                 adapted_outliers=(memory_noise,) * batches, n_known=(48,) * batches,
                 n_correct=(correct,) * batches, n_outliers=(noise,) * batches)


def test_the_shares_pool_a_networks_batches_and_corruptions() -> None:
    shares = F.trace_shares([_trace(), _trace(memory_noise=1, correct=36)])
    assert shares.adapted == pytest.approx((4 * 3 + 4 * 1) / 80) == shares.memory
    # Kept out: 48 + 3 − 20 = 31 per batch, of them 3 − 1 = 2 Noise; the Noise: 3 per batch.
    assert shares.precision == pytest.approx(2 / 31) and shares.recall == pytest.approx(2 / 3)
    assert shares.accuracy == pytest.approx((4 * 40 + 4 * 36) / (8 * 48)) and shares.batches == 8
    # An older trace, without the adapted and per-batch columns: STAMP adapts on its memory.
    old = Trace(memory_size=(10, 10), memory_outliers=(5, 0))
    assert F.trace_shares([old]).adapted == 0.25 and np.isnan(F.trace_shares([old]).recall)


def test_a_share_curve_follows_the_stream_position_over_corruptions() -> None:
    one = Trace(memory_size=(4, 8, 8), memory_outliers=(0, 2, 4))
    two = Trace(memory_size=(4, 8), memory_outliers=(4, 2))
    assert F.share_curve([one, two]).tolist() == [0.5, 0.25, 0.5]


def _shares(adapted: float) -> F.Shares:
    return F.Shares(adapted, adapted, 0.9, 0.8, 0.7, 100)


def test_the_factor_names_the_arm_that_restores_the_lead() -> None:
    reps = [Replicate(k, k) for k in range(5)]
    plain = dict(zip(reps, [-8.0, -6.0, 2.0, -5.0, -7.0]))
    arms = {"oracle_filter": dict(zip(reps, [3.0, 4.0, 5.0, -1.0, 4.0])),
            "no_memory": dict(zip(reps, [-9.0, -8.0, -1.0, -7.0, -6.0])),
            "half_step": dict(zip(reps, [-2.0, -1.0, 1.0, -3.0, -2.0]))}
    shares = dict(zip(reps, [_shares(a) for a in (0.31, 0.28, 0.34, 0.02, 0.30)]))
    full, short = F.factor_text(arms, shares, plain)
    assert full == ("STAMP adapts on 31 % Noise on 4 of 5 networks; with an oracle filter it leads by +3.0 on 4 of "
                    "5 networks (itself: 1)")
    assert short == "oracle filter: +3.0, 4 of 5 net." and len(short) <= 40


def test_where_no_arm_restores_the_lead_it_says_what_was_ruled_out() -> None:
    reps = [Replicate(k, k) for k in range(3)]
    plain = dict(zip(reps, [-8.0, -6.0, 2.0]))
    arms = {"oracle_filter": dict(zip(reps, [-8.0, -6.0, 2.0])), "half_step": dict(zip(reps, [-9.0, -1.0, 1.0]))}
    full, short = F.factor_text(arms, dict(zip(reps, [_shares(0.0)] * 3)), plain)
    assert full == ("STAMP adapts on under 10 % Noise on every one of 3 networks; no arm restores its lead: half its "
                    "step size comes closest (-3.0, holds on 1 of 3) against -4.0 itself (1 of 3); oracle filter -4.0")
    assert short == "none restores it; half step closest" and len(short) <= 40


def _record(spec, value: float, trace: Trace | None = None) -> Record:  # noqa: ANN001
    per = {c: {"acc": value, "auroc": value, "h": value} for c in spec.corruptions}
    body = {"key": spec.key(), "spec": spec.to_dict(), "per_corruption": per,
            "mean": {"acc": value, "auroc": value, "h": value}, "seconds": 1.0, "device": "cpu"}
    if trace is not None:
        body["trace"] = {c: trace.to_json() for c in spec.corruptions}
    return Record.from_json(body)


def test_the_driver_of_a_best_h_carries_the_measured_factor(tmp_path: Path) -> None:
    claim = C.BY_KEY["a_best_h"]
    store = ResultsStore(tmp_path)
    t1 = plans.TABLE1.notebook
    for replicate in NETWORKS.replicates:
        noisy = replicate.network != 3
        for method in PAPER_ORDER:
            spec = B.spec(C.Arm(t1, method), NETWORKS, replicate)
            value = {"stamp": 66.0 if noisy else 74.0, "bn_stats": 72.0}.get(method, 60.0)
            trace = _trace(memory_noise=4 if noisy else 0) if method == "stamp" else None
            store.put(_record(spec, value + 0.1 * replicate.network, trace))
        for name, value in (("oracle_filter", 75.0), ("no_memory", 64.0), ("half_step", 70.0)):
            spec = B.spec(C.Arm(t1, "stamp", diagnostic=name), NETWORKS, replicate)
            store.put(_record(spec, value + 0.1 * replicate.network))
    (verdict,) = J.judge_benchmark(B.BUILTIN, store, [claim])
    assert verdict.design == NETWORKS and verdict.held == (Replicate(3, 3),)
    assert verdict.drivers[0] == ("STAMP adapts on 40 % Noise on 4 of 5 networks; with an oracle filter it leads "
                                  "by +3.0 on 5 of 5 networks (itself: 1)")
    assert verdict.short_drivers[0] == "oracle filter: +3.0, 5 of 5 net."
    # The arms are cells of the design, computed by claims compute like the ledger's.
    keys = {s.key() for s in B.ledger_cells(NETWORKS)}
    assert all(B.spec(C.Arm(t1, "stamp", diagnostic=d), NETWORKS, r).key() in keys
               for d in F.stamp_diagnostics() for r in NETWORKS.replicates)
    assert not any(s.diagnostic for s in B.ledger_cells(B.BUILTIN.design("streams")))
    assert json.loads(json.dumps(C.paper_arm_value(C.Arm(t1, "stamp", diagnostic="oracle_filter"), "h"))) is None
    assert len(CORRUPTIONS) == 15


def test_the_trace_figure_keeps_a_networks_colour_in_both_panels() -> None:
    from matplotlib.colors import to_hex

    from stamplib.evidence import tables

    records = {}
    for replicate in NETWORKS.replicates[:3]:
        # Network 0's trace predates the accuracy columns: it has a memory line and no accuracy line.
        full = replicate.network != 0
        old = Trace(memory_size=(10,) * 4, memory_outliers=(3,) * 4)
        for method, trace in (("stamp", _trace() if full else old), ("bn_stats", _trace(correct=44))):
            spec = B.spec(C.Arm(plans.TABLE1.notebook, method), NETWORKS, replicate)
            records[spec.key()] = _record(spec, 70.0, trace)
    figure = tables.trace_figure(B.BUILTIN, records)
    memory, accuracy = figure.axes
    colours = [{line.get_label(): to_hex(line.get_color()) for line in ax.get_lines() if "network" in line.get_label()}
               for ax in (memory, accuracy)]
    assert len(colours[0]) == 3 and len(colours[1]) == 2
    assert all(colours[0][label] == colour for label, colour in colours[1].items())
    assert len(set(colours[0].values())) == 3
    assert [line.get_ydata()[0] for line in accuracy.get_lines() if "network" in line.get_label()] == \
        pytest.approx([100 * (40 - 44) / 48] * 2)
