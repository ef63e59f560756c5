"""Exercises of the course: a function the student completes, and a check that runs it against
stamplib's own implementation on fresh inputs and says what is wrong.

The markup follows the student side of nbgrader's convention: an exercise cell (tagged
``exercise``) defines the function with ``# YOUR CODE HERE`` and ``raise NotImplementedError()``
as its body, and the next cell (tagged ``check``) calls :func:`check`. The reference solutions
and the checks live here, not in the notebooks: they are linted, tested (a wrong answer must
fail its check, the solution must pass it) and shared by every copy of a notebook. The
notebooks' ``solutions`` parameter (papermill) makes :func:`check` take the reference solution
instead of the student's function, so the headless runs and the tests execute every notebook
whole; a student's copy starts with it off.

Each exercise registers itself with :func:`exercise`: its name (the function's name in the
notebook), its lesson, the reference solution, what stamplib implementation it is checked
against, and a function that tries an answer on fixed boundary cases (where a mistake that
random inputs rarely reach shows on every run), then on fresh random cases, and returns the
problems it found (empty: right).

A message names a cause only when the check has tested that cause on the student's own output:
a known mistake is named when computing the mistaken formula reproduces what the answer returned
on every case the check ran, and the right formula does not (:func:`reproduced`); "it raised"
only when the student's function raised (:class:`StudentRaised`). Otherwise the message says
what differs and where: the input, the expected value and what the answer gave. A message is
always the first wrong case's: a statement about a boundary case is made only when that case is
the first the answer gets wrong.

A check holds the answer to the lesson's words: what the exercise says to return (a tensor, a
Python float, a 0-d tensor, a bool mask, a list in class order) is required as such
(:func:`returned_tensor`, :func:`returned_number`, :class:`WrongReturn`), and an answer that
changes an input it was given, in place, is refused (:class:`ChangedItsInput`; every call is
guarded by :func:`_guarded`), whatever it returns. An answer that runs a reference solution's code,
however it reaches it (imported at the top or inside the function, through :data:`EXERCISES`), is
refused (:class:`CalledASolution`): no reference solution is reachable while a student's answer is
checked.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import math
import numbers
import secrets
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

Answer = Callable[..., Any]
#: Tries an answer on fixed cases, then fresh ones drawn from the generator; returns what is wrong
#: (empty: right).
FindProblems = Callable[[Answer, torch.Generator], list[str]]


@dataclass(frozen=True)
class Exercise:
    """One exercise: ``name`` is the function the student completes, ``lesson`` its notebook."""

    name: str
    lesson: str
    title: str
    solution: Answer
    checked_against: str  # the stamplib implementation the answer is compared with, for the messages
    find_problems: FindProblems


#: Every exercise by name, in the order the lessons register them.
EXERCISES: dict[str, Exercise] = {}


def exercise(lesson: str, title: str, solution: Answer, checked_against: str) -> Callable[[FindProblems], FindProblems]:
    """Register the decorated problem finder as the check of ``solution`` (named after it)."""

    def register(find_problems: FindProblems) -> FindProblems:
        name = solution.__name__
        if name in EXERCISES:
            raise ValueError(f"exercise {name!r} is registered twice")
        EXERCISES[name] = Exercise(name, lesson, title, solution, checked_against, find_problems)
        return find_problems

    return register


def of_lesson(lesson: str) -> list[Exercise]:
    """The exercises of one notebook, in order."""
    return [e for e in EXERCISES.values() if e.lesson == lesson]


@dataclass(frozen=True)
class ExerciseResult:
    """What :func:`check` found; shown as Markdown in a notebook."""

    exercise: Exercise
    passed: bool
    problems: tuple[str, ...]
    used_solution: bool
    started: bool = True
    seed: int | None = None  # of the failing cases, to repeat them: check(..., seed=seed)

    def lines(self) -> list[str]:
        ex = self.exercise
        if self.used_solution:
            return [f"✓ `{ex.name}`: the reference solution (`solutions=True`) agrees with {ex.checked_against} "
                    "on fresh inputs. It reads:", "", "```python", solution_source(ex.name), "```"]
        if self.passed:
            return [f"✓ `{ex.name}` is right: it agrees with {ex.checked_against} on fresh inputs."]
        if not self.started:
            return [f"… `{ex.name}` is not written yet: replace `raise NotImplementedError()` with your code and "
                    "run this cell again (or run the notebook with `solutions=True` to see a solution)."]
        lines = [f"✗ `{ex.name}` is not right yet (compared with {ex.checked_against}):", ""]
        lines += [f"- {p}" for p in self.problems]
        if self.seed is not None:
            lines += ["", f"(These inputs again: `check(\"{ex.name}\", {ex.name}, seed={self.seed})`.)"]
        return lines

    def _repr_markdown_(self) -> str:
        return "\n".join(self.lines())

    def __str__(self) -> str:
        return "\n".join(self.lines())

    __repr__ = __str__


def solution_source(name: str) -> str:
    """The source of an exercise's reference solution, as a notebook shows it."""
    return textwrap.dedent(inspect.getsource(EXERCISES[name].solution)).strip()


def check(name: str, answer: Answer | None = None, solutions: bool = False, seed: int | None = None) -> ExerciseResult:
    """Check the student's ``answer`` to exercise ``name`` on fresh random inputs (``seed``: the
    same inputs again). With ``solutions`` the reference solution is checked instead, and a
    failure raises: it is a bug of the course, not the student's."""
    ex = EXERCISES.get(name)
    if ex is None:
        raise KeyError(f"no exercise {name!r}; the exercises are {', '.join(EXERCISES)}")
    candidate = ex.solution if solutions else answer
    if candidate is None:
        raise ValueError(f"give the function you wrote: check({name!r}, {name})")
    drawn = seed if seed is not None else secrets.randbits(31)
    generator = torch.Generator().manual_seed(drawn)
    started = True
    try:
        with one_thread():
            problems = ex.find_problems(_guarded(candidate, _parameters(ex.solution), watch=not solutions), generator)
    except NotImplementedError:
        problems, started = ["not written yet"], False
    except StudentRaised as raised:  # the student's own function raised: say how
        err = raised.error
        problems = [f"it raised {type(err).__name__}: {err}"]
    except WrongReturn as returned:  # not what the exercise says to return: a type, a shape, an order
        problems = [str(returned)]
    except (ChangedItsInput, CalledASolution) as refused:
        problems = [str(refused)]
    except Exception as err:  # the answer's result broke the check's reading of it: say that, not "raised"
        problems = [f"the check could not read what it returned ({type(err).__name__}: {err}); the exercise "
                    "says what to return"]
    result = ExerciseResult(ex, not problems, tuple(problems), solutions, started, None if not problems else drawn)
    if solutions and problems:
        raise AssertionError(f"the reference solution of {name!r} fails its own check: {problems}")
    return result


class StudentRaised(Exception):
    """The student's function raised ``error`` (not the check's own code)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class WrongReturn(Exception):
    """The answer returned another kind of value than its exercise says (a list for a tensor, a
    shape [1] for a 0-d tensor, a set for a list in class order); the message says what to return."""


class ChangedItsInput(Exception):
    """The answer changed one of the inputs it was given (in place): a caller still uses them."""


class CalledASolution(Exception):
    """The answer ran a reference solution's code (:data:`EXERCISES`), however it reached it: an
    import at the top of the notebook, one inside the function, the exercise's entry."""


@contextmanager
def _solutions_watched() -> Iterator[list[str]]:
    """Inside the block, the names of the reference solutions whose code runs are collected in the
    list it gives (a profile function sees every Python call; the solutions' code objects are the
    ones it looks for, so a copy of the function, an alias or an import inside the student's function
    is seen alike, and an exception the student catches hides nothing). The profile function that
    was set before (a profiler's) keeps being called."""
    codes = {ex.solution.__code__: name for name, ex in EXERCISES.items()}
    seen: list[str] = []
    before = sys.getprofile()

    def watch(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in codes:
            seen.append(codes[frame.f_code])
        if before is not None:
            before(frame, event, arg)

    sys.setprofile(watch)
    try:
        yield seen
    finally:
        sys.setprofile(before)


def _parameters(solution: Answer) -> tuple[str, ...]:
    """The names of an exercise's arguments, as the lesson's function names them."""
    return tuple(inspect.signature(solution).parameters)


def _snapshot(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    return copy.deepcopy(value) if isinstance(value, list | dict | set) else value


def _unchanged(before: Any, after: Any) -> bool:
    if isinstance(before, torch.Tensor):
        if not isinstance(after, torch.Tensor) or before.shape != after.shape or before.dtype != after.dtype:
            return False
        now = after.detach()
        return bool(((before == now) | (before.isnan() & now.isnan())).all()) if before.is_floating_point() \
            else torch.equal(before, now)
    return before == after if isinstance(before, list | dict | set) else True


def _guarded(answer: Answer, names: Sequence[str] = (), watch: bool = False) -> Answer:
    """``answer``, whose exceptions (but an unwritten stub's NotImplementedError) arrive as
    :class:`StudentRaised`, so a message says "it raised" only when the student's code did; and
    which raises :class:`ChangedItsInput` when the answer changed a tensor or list it was given
    (``names``: the arguments' names, for the message). Every exercise's inputs are the caller's:
    an answer that patches them in place returns a right value and breaks the code that called it.
    With ``watch`` (a student's answer, not the solution itself) it raises :class:`CalledASolution`
    when the answer ran a reference solution's code (:func:`_solutions_watched`)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        given = [*zip(names, args), *kwargs.items()]
        before = [_snapshot(value) for _, value in given]
        try:
            with _solutions_watched() if watch else contextlib.nullcontext([]) as called:
                result = answer(*args, **kwargs)
        except NotImplementedError:
            raise
        except Exception as err:
            if watch and called:
                raise CalledASolution(_called_message(called)) from None
            raise StudentRaised(err) from err
        if called:
            raise CalledASolution(_called_message(called))
        for (name, value), kept in zip(given, before):
            if not _unchanged(kept, value):
                how = ("with operations that return new tensors (`torch.where`, `x + y` rather than `x += y`, "
                       f"`x.clamp(...)` rather than `x.clamp_(...)`) or on a copy (`{name}.clone()`)"
                       if isinstance(kept, torch.Tensor) else f"on a copy (`list({name})`, `sorted({name})`)")
                raise ChangedItsInput(f"it changes its input `{name}` in place (the value it returns may be right): "
                                      f"the caller still uses `{name}`, so leave it as it is and work {how}")
        return result

    call.__name__ = getattr(answer, "__name__", "answer")
    return call


def _called_message(called: Sequence[str]) -> str:
    ex = EXERCISES[called[0]]
    where = f"{ex.solution.__module__}.{ex.solution.__name__}"
    return (f"it calls the reference solution (`{where}`) rather than computing the result itself: the exercise is "
            "to write the function's body, so leave stamplib's solutions out of it")


# --------------------------------------------------------------------------- helpers for checks


@contextmanager
def one_thread() -> Iterator[None]:
    """Run the block on one intra-op thread: a check's tensors are small, and on a shared
    two-core machine OpenMP's extra threads cost far more than they save (tests/conftest.py)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def kind_of(value: Any) -> str:
    """What ``value`` is, in a few words, for a message that says what the answer returned."""
    if value is None:
        return "None (does the function end with `return`?)"
    if isinstance(value, torch.Tensor):
        return f"a {value.dim()}-d tensor of shape {tuple(value.shape)}" if value.dim() else "a 0-d tensor"
    if isinstance(value, np.ndarray):
        return f"a numpy array of shape {value.shape}"
    article = "an" if type(value).__name__[0] in "aeiou" else "a"
    return f"{article} {type(value).__name__}"


def returned_tensor(value: Any, what: str) -> torch.Tensor:
    """``value`` (an answer's result) as a float64 tensor, detached; :class:`WrongReturn` when it
    is not a tensor (``what``: what the exercise asks for, e.g. "a tensor of shape [B]")."""
    if not isinstance(value, torch.Tensor):
        raise WrongReturn(f"it returns {kind_of(value)}; return {what} (a torch.Tensor), as the exercise says")
    return value.detach().double()


def returned_number(value: Any, what: str = "one number") -> float:
    """``value`` (an answer's result) as a float; :class:`WrongReturn` unless it is a Python (or
    numpy) number: a tensor, an array or a list is not the ``float`` the exercise's signature
    gives."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    single = isinstance(value, torch.Tensor) and value.numel() == 1 or isinstance(value, np.ndarray) and value.size == 1
    if single:
        raise WrongReturn(f"it returns {kind_of(value)}; return {what} as a Python float, as the signature says "
                          "(`-> float`): `float(t)` or `t.item()` turns a one-element tensor into one")
    raise WrongReturn(f"it returns {kind_of(value)}; return {what}, a Python float, as the signature says (`-> float`)")


#: The relative tolerance of the checks: float32 rounds a value to about 6e-8 of its size and a sum
#: of a few hundred terms to well under 1e-5, while every mistake a check names is at least 1e-3 off
#: on the cases it draws (the fixed boundary cases put them there).
TOLERANCE = 1e-5


def close(a: torch.Tensor, b: torch.Tensor, tolerance: float | torch.Tensor = TOLERANCE) -> bool:
    """Same shape and equal within ``tolerance`` (relative to the values' size; a tensor: an
    absolute tolerance per element), NaNs equal."""
    if a.shape != b.shape:
        return False
    a, b = a.double(), b.double()
    if isinstance(tolerance, torch.Tensor):
        same = ((a - b).abs() <= tolerance) | (a.isnan() & b.isnan())
        return bool(same.all())
    scale = max(1.0, float(b.abs().nan_to_num().max())) if b.numel() else 1.0
    return bool(torch.allclose(a, b, atol=tolerance * scale, rtol=0.0, equal_nan=True))


def near(a: float, b: float, tolerance: float = TOLERANCE) -> bool:
    """Two numbers equal within ``tolerance`` of the larger one's size (at least 1), NaNs equal."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tolerance * max(1.0, abs(a), abs(b))


@dataclass
class Trial:
    """One case a check ran: what the answer returned, the right result, and what each known
    mistake would have returned on the same input, as (message, value) in the same order on every
    trial of a check (a message may quote its own case)."""

    got: Any
    expected: Any
    mistakes: Sequence[tuple[str, Any]]
    tolerance: float | torch.Tensor = TOLERANCE


def _same(a: Any, b: Any, tolerance: float | torch.Tensor) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return close(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64), tolerance)
    if isinstance(a, float | int) and isinstance(b, float | int):
        return near(float(a), float(b), float(tolerance))
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_same(x, y, tolerance) for x, y in zip(a, b))
    return a == b


def wrong(trial: Trial) -> bool:
    """Whether the answer's result differs from the right one on this trial."""
    return not _same(trial.got, trial.expected, trial.tolerance)


def reproduced(trials: Sequence[Trial]) -> str | None:
    """The message of the one known mistake that reproduces the answer on every trial and differs
    from the right result on at least one, else None: a cause is named only where the check has
    computed it and found the student's output there. The wording is the first wrong trial's."""
    failing = next((t for t in trials if wrong(t)), None)
    if failing is None:
        return None
    count = min(len(t.mistakes) for t in trials)
    found = [i for i in range(count)
             if all(_same(t.got, t.mistakes[i][1], t.tolerance) for t in trials)
             and any(not _same(t.mistakes[i][1], t.expected, t.tolerance) for t in trials)]
    messages = {failing.mistakes[i][0] for i in found}
    return messages.pop() if len(messages) == 1 else None


def first_match(answer: torch.Tensor, expected: torch.Tensor, mistakes: Sequence[tuple[str, torch.Tensor]],
                tolerance: float = TOLERANCE) -> str | None:
    """:func:`reproduced` on one case: the message of the known mistake whose result ``answer``
    equals there and the right result does not, else None (also when two mistakes with different
    messages both match: the case cannot tell which it is)."""
    return reproduced([Trial(answer, expected, list(mistakes), tolerance)])


def two_numbers(got: float, expected: float) -> tuple[str, str]:
    """``got`` and ``expected`` with as many significant digits as it takes to tell them apart
    (at least 6): a message never prints two equal numbers."""
    got, expected = got + 0.0, expected + 0.0  # −0.0 + 0.0 is 0.0: a message never prints "-0"
    for digits in range(6, 18):
        shown = f"{got:.{digits}g}", f"{expected:.{digits}g}"
        if shown[0] != shown[1]:
            return shown
    return repr(got), repr(expected)


def largest_difference(answer: torch.Tensor, expected: torch.Tensor) -> str:
    """"by up to X" for two tensors of one shape."""
    return f"by up to {float((answer - expected).abs().nan_to_num(float('inf')).max()):.4g}"


def shape_problem(answer: torch.Tensor, expected: torch.Tensor, hint: str) -> str | None:
    """A message when the shapes differ (``hint`` says which shape and why), else None."""
    if answer.shape == expected.shape:
        return None
    return f"it returns shape {tuple(answer.shape)}; expected {tuple(expected.shape)}: {hint}"


def uniform(generator: torch.Generator, low: float, high: float) -> float:
    """One number drawn uniformly from [low, high)."""
    return low + (high - low) * float(torch.rand((), generator=generator, dtype=torch.float64))


def integer(generator: torch.Generator, low: int, high: int) -> int:
    """One integer drawn uniformly from [low, high]."""
    return int(torch.randint(low, high + 1, (), generator=generator))
