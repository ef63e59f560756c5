"""tools/claims_before_after.py puts each changed verdict down to the rule, the networks or both, and
does not count a verdict that came back to its old word."""

from __future__ import annotations

from types import SimpleNamespace

from tests.support import load_script


def _tool():  # noqa: ANN202 - the module
    return load_script("tools/claims_before_after.py")


def _verdict(label: str) -> SimpleNamespace:
    return SimpleNamespace(label=label)


def test_each_cause_is_named_from_the_three_words():
    cause = _tool().cause
    assert cause("within the noise", _verdict("undecided (could detect ≥ 5.4)"),
                 _verdict("undecided (could detect ≥ 3.1)")) == "rule"
    assert cause("yes", _verdict("yes"), _verdict("undecided (could detect ≥ 38.6)")) == "networks"
    assert cause("within the noise", _verdict("yes"), _verdict("no")) == "both"
    assert cause("yes", _verdict("yes"), _verdict("yes")) == ""


def test_a_verdict_back_at_its_old_word_is_not_a_change():
    cause = _tool().cause
    found = cause("no", _verdict("smaller than the paper's"), _verdict("no"))
    assert found == "none (rule → smaller than the paper's, networks back)"
    assert found not in _tool().CAUSES
