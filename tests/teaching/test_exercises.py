"""Every exercise of the course: its reference solution passes its check (as a student's answer
and with ``solutions=True``), a wrong answer fails it and the message names the mistake, an
unwritten one says so, and a failing reference solution is an error, not a student's mistake."""

from __future__ import annotations

import math

import pytest
import torch

from stamplib.teaching import EXERCISES, check
from stamplib.teaching.exercises import CheckResult, of_lesson


def _entropy(p: torch.Tensor) -> torch.Tensor:
    return -torch.special.xlogy(p, p).sum(1)


def _logit_entropy(logits: torch.Tensor) -> torch.Tensor:
    log_p = torch.log_softmax(logits, 1)
    return -(log_p.exp() * log_p).sum(1)


def _bn(x, w, b, eps, dims=(0, 2, 3), unbiased=False, eps_inside=True, affine=True):
    mean, var = x.mean(dims, keepdim=True), x.var(dims, unbiased=unbiased, keepdim=True)
    normalised = (x - mean) / (torch.sqrt(var + eps) if eps_inside else var.sqrt() + eps)
    return normalised * w.view(1, -1, 1, 1) + b.view(1, -1, 1, 1) if affine else normalised


def _self_weighted(logits, scale, sign=-1.0, detach=False, with_scale=True):
    h = _logit_entropy(logits)
    w = torch.softmax(sign * h, 0)
    w = w.detach() if detach else w
    return (h * (scale if with_scale else 1) * w).mean()


def _candidates(counts, xi, capacity, present_only=True, when_full=True, by_counts=False, all_ties=True):
    if when_full and sum(counts) < capacity:
        return []
    classes = [c for c in range(len(counts)) if counts[c] > 0 or not present_only]
    key = counts if by_counts else xi
    top = max(key[c] for c in classes)
    tied = [c for c in classes if key[c] == top]
    return tied if all_ties else tied[:1]


def _reliable(p, clean, ref, alpha, threshold_ln=True, consistency=True, low=True, averaged_label=False):
    h = -(p * torch.log(p + 1e-5)).sum(1)
    threshold = alpha * math.log(p.shape[1]) if threshold_ln else alpha
    mask = h < threshold if low else h > threshold
    if consistency:
        mask &= (p.argmax(1) if averaged_label else clean) == ref
    return mask


#: Per exercise: wrong answers, each with a fragment of the message its check must give.
WRONG = {
    "softmax_entropy": [
        (lambda p: -(p * torch.log(p)).sum(1), "0·log 0"),
        (lambda p: _entropy(p) / math.log(2), "bits"),
        (lambda p: -_entropy(p), "sign"),
        (lambda p: _entropy(p).sum(), "one entropy per sample"),
        (lambda p: _entropy(p) / p.shape[1], "averages over the classes"),
    ],
    "entropy_from_logits": [
        (lambda z: -(torch.softmax(z, 1) * torch.log(torch.softmax(z, 1))).sum(1), "large logits"),
        (lambda z: _logit_entropy(z).detach(), "no gradient"),
        (lambda z: -_logit_entropy(z), "sign"),
    ],
    "batch_norm_with_batch_statistics": [
        (lambda x, w, b, e: _bn(x, w, b, e, unbiased=True), "unbiased"),
        (lambda x, w, b, e: _bn(x, w, b, e, eps_inside=False), "inside the square root"),
        (lambda x, w, b, e: _bn(x, w, b, e, affine=False), "weight and bias"),
        (lambda x, w, b, e: _bn(x, w, b, e, dims=(1, 2, 3)), "per sample"),
        (lambda x, w, b, e: _bn(x, w, b, e, dims=(0,)), "spatial positions"),
        (lambda x, w, b, e: x.mean(), "shape"),
    ],
    "auroc_percent": [
        (lambda s, o: float((s[o][:, None] > s[~o][None, :]).double().mean()
                            + 0.5 * (s[o][:, None] == s[~o][None, :]).double().mean()), "fraction"),
        (lambda s, o: 100 - 100 * float((s[o][:, None] > s[~o][None, :]).double().mean()
                                        + 0.5 * (s[o][:, None] == s[~o][None, :]).double().mean()), "reversed"),
        (lambda s, o: 100 * float((s[o][:, None] > s[~o][None, :]).double().mean()), "ties"),
    ],
    "h_score": [
        (lambda a, b: (a + b) / 2, "arithmetic mean"),
        (lambda a, b: 2 * a * b / (a + b), "both 0"),
        (lambda a, b: a * b / (a + b) if a + b else 0.0, "factor 2"),
        (lambda a, b: math.sqrt(a * b), "geometric"),
    ],
    "filter_precision_recall": [
        (lambda p, o: (float((p & ~o).sum()) / float((~o).sum()),
                       float((p & ~o).sum()) / float(p.sum()) if p.any() else math.nan), "swapped"),
        (lambda p, o: (100 * float((p & ~o).sum()) / float(p.sum()) if p.any() else math.nan,
                       100 * float((p & ~o).sum()) / float((~o).sum())), "fractions"),
        (lambda p, o: (float((p & ~o).sum()) / len(p), float((p & ~o).sum()) / float((~o).sum())), "whole batch"),
        (lambda p, o: float((p & ~o).sum()) / float(p.sum()), "two numbers"),
    ],
    "self_weighted_entropy": [
        (lambda z, s: _self_weighted(z, s, sign=1.0), "uncertain"),
        (lambda z, s: _self_weighted(z, s, detach=True), "detached"),
        (lambda z, s: _self_weighted(z, s, with_scale=False), "scale"),
        (lambda z, s: _logit_entropy(z).mean(), "plain mean entropy"),
    ],
    "eviction_candidates": [
        (lambda c, x, k: _candidates(c, x, k, present_only=False), "no sample in the memory"),
        (lambda c, x, k: _candidates(c, x, k, by_counts=True), "current counts"),
        (lambda c, x, k: _candidates(c, x, k, when_full=False), "room"),
        (lambda c, x, k: _candidates(c, x, k, all_ties=False), "ties"),
    ],
    "cosine_step_size": [
        (lambda lr, n, t: lr * 0.5 * (1 + math.cos(math.pi * min(n, t) / t)), "rises again"),
        (lambda lr, n, t: lr * (1 + math.cos(math.pi * n / t)), "½"),
        (lambda lr, n, t: lr * 0.5 * (1 + math.cos(math.pi * (n + 1) / t)), "off by one"),
        (lambda lr, n, t: lr * 0.5 * (1 + math.cos(180 * n / t)), "radians"),
    ],
    "stamp_reliable": [
        (lambda p, c, r, a: _reliable(p, c, r, a, threshold_ln=False), "α·ln C"),
        (lambda p, c, r, a: _reliable(p, c, r, a, consistency=False), "source weights"),
        (lambda p, c, r, a: _reliable(p, c, r, a, low=False), "*low*"),
        (lambda p, c, r, a: _reliable(p, c, r, a, averaged_label=True), "clean view's label"),
    ],
    "class_frequency_update": [
        (lambda x, c, b: b * x + (1 - b) * c, "β weighs the new counts"),
        (lambda x, c, b: (1 - b) * x + b * c / c.sum(), "shares"),
    ],
}
#: The exercises whose check runs STAMP steps: one seed keeps the test short.
SLOW = {"stamp_reliable"}


def seeds_for(name: str) -> tuple[int, ...]:
    return (0,) if name in SLOW else (0, 1, 2)


def test_every_exercise_has_wrong_answers_here() -> None:
    assert set(WRONG) == set(EXERCISES)
    assert all(2 <= len(of_lesson(lesson)) <= 3 for lesson in {e.lesson for e in EXERCISES.values()})


@pytest.mark.parametrize("name", list(EXERCISES))
def test_the_reference_solution_passes_as_an_answer_and_with_solutions_on(name: str) -> None:
    for seed in seeds_for(name):
        result = check(name, EXERCISES[name].solution, seed=seed)
        assert result.passed and not result.problems, result
        assert "is right" in str(result)
    shown = check(name, None, solutions=True, seed=7)
    assert shown.passed and shown.used_solution and f"def {name}(" in shown._repr_markdown_()


@pytest.mark.parametrize("name", list(EXERCISES))
def test_a_wrong_answer_fails_and_the_message_names_the_mistake(name: str) -> None:
    for wrong, fragment in WRONG[name]:
        for seed in seeds_for(name):
            result = check(name, wrong, seed=seed)
            assert not result.passed, f"{name}: a wrong answer ({fragment}) passed with seed {seed}"
            assert any(fragment in p for p in result.problems), (fragment, result.problems)
            assert f"seed={seed}" in str(result) and "✗" in str(result)


def test_an_unwritten_answer_says_so_and_a_crash_is_reported() -> None:
    def softmax_entropy(probs: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError()

    result = check("softmax_entropy", softmax_entropy)
    assert not result.passed and not result.started and "not written yet" in str(result)
    crashed = check("h_score", lambda a, b: a / "b")
    assert not crashed.passed and "it raised TypeError" in crashed.problems[0]


def test_a_failing_reference_solution_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from stamplib.teaching import exercises

    broken = dataclasses.replace(EXERCISES["h_score"], solution=lambda a, b: (a + b) / 2)
    monkeypatch.setitem(exercises.EXERCISES, "h_score", broken)
    with pytest.raises(AssertionError, match="reference solution of 'h_score' fails"):
        check("h_score", None, solutions=True)


def test_the_same_seed_gives_the_same_verdict_and_fresh_checks_draw_new_inputs() -> None:
    wrong = WRONG["auroc_percent"][2][0]
    first, again = check("auroc_percent", wrong, seed=11), check("auroc_percent", wrong, seed=11)
    assert isinstance(first, CheckResult) and first.problems == again.problems
    assert len({check("h_score", lambda a, b: (a + b) / 2).seed for _ in range(4)}) > 1


def test_unknown_exercise_and_missing_answer_are_refused() -> None:
    with pytest.raises(KeyError, match="no exercise"):
        check("entropy", lambda p: p)
    with pytest.raises(ValueError, match="give the function"):
        check("h_score")
