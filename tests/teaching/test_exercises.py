"""Every exercise of the course: its reference solution passes its check (as a student's answer
and with ``solutions=True``), an unwritten one says so, and a failing reference solution is an
error, not a student's mistake. The wrong answers, and the right ones written otherwise, are in
test_wrong_answers.py."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import pytest
import torch

from stamplib.teaching import EXERCISES, check
from stamplib.teaching.exercises import ExerciseResult, of_lesson, solution_source

#: The exercises whose check runs STAMP steps: one seed keeps the test short.
SLOW = {"stamp_reliable"}


def seeds_for(name: str) -> tuple[int, ...]:
    return (0,) if name in SLOW else (0, 1, 2)


def _strict_auroc(s: torch.Tensor, o: torch.Tensor) -> float:
    """A wrong AUROC: a tie counts nothing."""
    return 100 * float((s[o][:, None] > s[~o][None, :]).double().mean())


def test_every_lesson_has_two_or_three_exercises() -> None:
    assert all(2 <= len(of_lesson(lesson)) <= 3 for lesson in {e.lesson for e in EXERCISES.values()})


def _written_as_the_solution(name: str) -> Any:
    """A student's function that reads as the reference solution: its source compiled anew, in its
    module's namespace (its own code, not the solution's)."""
    solution = EXERCISES[name].solution
    namespace = dict(vars(inspect.getmodule(solution)))
    exec(solution_source(name), namespace)  # noqa: S102 - the package's own solution
    return namespace[name]


@pytest.mark.parametrize("name", list(EXERCISES))
def test_the_reference_solution_passes_as_an_answer_and_with_solutions_on(name: str) -> None:
    for seed in seeds_for(name):
        result = check(name, _written_as_the_solution(name), seed=seed)
        assert result.passed and not result.problems, result
        assert "is right" in str(result)
    shown = check(name, None, solutions=True, seed=7)
    assert shown.passed and shown.used_solution and f"def {name}(" in shown._repr_markdown_()


@pytest.mark.parametrize("name", list(EXERCISES))
def test_no_reference_solution_is_reachable_from_an_answer(name: str) -> None:
    """A one-line wrapper that calls the solution from inside the student's function was graded right
    (issue 83): the solution itself, a wrapper importing it inside the function, one reaching it
    through the exercise's entry, and one that catches what the check does are all refused."""
    solution = EXERCISES[name].solution
    module = inspect.getmodule(solution).__name__

    def wrapper(*args: Any) -> Any:
        found = importlib.import_module(module)
        return getattr(found, name)(*args)

    def through_the_entry(*args: Any) -> Any:
        try:
            return EXERCISES[name].solution(*args)
        except BaseException:  # noqa: BLE001 - a student hiding the refusal
            return None

    for answer in (solution, wrapper, through_the_entry):
        result = check(name, answer, seed=0)
        assert not result.passed and result.problems == (
            f"it calls the reference solution (`{module}.{name}`) rather than computing the result itself: the "
            "exercise is to write the function's body, so leave stamplib's solutions out of it",), result


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
    first, again = check("auroc_percent", _strict_auroc, seed=11), check("auroc_percent", _strict_auroc, seed=11)
    assert isinstance(first, ExerciseResult) and first.problems == again.problems
    assert len({check("h_score", lambda a, b: (a + b) / 2).seed for _ in range(4)}) > 1


def test_unknown_exercise_and_missing_answer_are_refused() -> None:
    with pytest.raises(KeyError, match="no exercise"):
        check("entropy", lambda p: p)
    with pytest.raises(ValueError, match="give the function"):
        check("h_score")
