"""The instructor's side of the course (docs/course_lab.md): hand out the student
copies (:func:`release`) and grade what comes back (:func:`grade`).

**Release.** The overview and the lessons, as a student gets them: ``solutions`` off, outputs
and execution counts cleared, cell tags kept, every ``### BEGIN SOLUTION`` … ``### END SOLUTION``
block replaced by the stub nbgrader leaves (``# YOUR CODE HERE`` / ``raise NotImplementedError()``),
the check cells locked (``editable``/``deletable`` false, which JupyterLab honours), the lesson's
name in the notebook's metadata, and a short README. A copy that would still show solution code
is refused.

**Grade.** Each submitted lesson runs in a fresh kernel (nbclient) in a temporary folder, under one
time limit for the student's code and the checks together. The grader runs the student's cells
(the exercise cells and any cell the student added), never the lesson's own cells (which render
the results store and would make grading depend on it), never the parameters cell, and never the
student's check cells: after each exercise cell it runs its own check, which calls
:func:`stamplib.teaching.exercises.check` with ``solutions=False`` as captured before any student
code ran, and prints the result as one JSON line after a marker made fresh for each run. It reads
that line from the output of its own cell only. An exercise is checked after the last cell that
defines its function with more than the stub, wherever that cell is: students often write the
answer in a new cell below the check cell and leave the stub in place. Separately, each
exercise's check cell in the submission is compared with the package's notebook by its syntax
tree: a deleted check cell, or one whose code changed, fails the exercise whatever the function
does; a comment or blank line added to it does not. A handed-in overview (00) gets one row saying
it has no exercises.

**Every file handed in gets a row** (:func:`look_at`, before anything runs): a file that is not an
``.ipynb`` ("not a notebook", or a notebook saved under another name), an unreadable one, an empty
one (no cell with anything in it: "empty" for each exercise of the lesson its name gives, never
"check cell deleted"), one that is no lesson, the overview; and duplicates (:func:`flag_duplicates`):
one lesson handed in twice in one folder under names that differ by a copy's ending ("14.ipynb",
"14 (1).ipynb") is graded once, the last modified copy, and each other copy's row says whose
duplicate it is. The summary counts every file.

**Why nbclient here and papermill for the paper notebooks** (:mod:`stamplib.notebook_runner`):
the two runners do different jobs. Papermill executes a committed notebook whole with injected
parameters and writes it out, which is what rendering the paper notebooks and the lessons needs.
Grading instead builds a new notebook (the student's cells interleaved with the grader's own
checks), runs it cell by cell under one deadline that covers the student's code and not the
kernel's start, interrupts a cell past that deadline, reads each grader cell's output as it
finishes, and records which student cell was running when a kernel died. Papermill offers none of
that per-cell control (it runs to the end or to the first error, with a per-cell timeout); it is
built on nbclient, so the grader uses the layer papermill itself uses, and no second dependency. A syntax error, an
endless loop, a dead kernel or an
unreadable file becomes a row with its reason, never a crash and never a pass.

Student code runs with the grader's rights: grade in a throwaway account or container. The grader
defends against the plain ways to fake a pass (an edited check cell, a replaced ``check`` or
exercise entry, the reference solution imported from stamplib or called from inside the student's
function: :func:`stamplib.teaching.exercises.check` refuses an answer that runs a solution's code),
not against code written to attack it.
"""

from __future__ import annotations

import ast
import csv
import dataclasses
import io
import json
import math
import re
import secrets
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stamplib import paths
from stamplib.extras import require, require_installed

_PURPOSE = "the course's release and grading"
#: The notebooks a student gets: the overview, then the lessons (their numbers).
COURSE_NOTEBOOKS = ("00_walkthrough", "14_", "15_", "16_", "17_")
EXERCISE_TAG, CHECK_TAG = "exercise", "check"
STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
#: Cell metadata a student copy must not carry over from an executed notebook.
EXECUTION_METADATA = ("execution", "papermill", "collapsed", "scrolled", "ExecuteTime")
#: Seconds the grader's own first cell (imports of torch and stamplib) may take; not the student's time.
SETUP_SECONDS = 300
GRADES_COLUMNS = ("file", "lesson", "exercise", "passed", "message")


def _nbformat() -> Any:
    return require("nbformat", "notebooks", _PURPOSE)


# --------------------------------------------------------------------------- the package's notebooks


def _source(cell: Any) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _normalized(source: str) -> str:
    """A cell's source without trailing spaces and blank lines: editors add and drop them."""
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def _tags(cell: Any) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _defined_function(source: str) -> str | None:
    """The name of the first top-level ``def`` in ``source`` (found by text, so that a cell with
    a syntax error still names its exercise)."""
    found = re.search(r"^def\s+(\w+)\s*\(", source, re.MULTILINE)
    return found.group(1) if found else None


def _check_call(source: str) -> str | None:
    """The exercise a ``check("name", ...)`` call in ``source`` names."""
    found = re.search(r"""\bcheck\(\s*["'](\w+)["']""", source)
    return found.group(1) if found else None


@dataclass(frozen=True)
class Lesson:
    """One of the package's course notebooks, as the grader needs it."""

    name: str  # the notebook's stem, e.g. 14_course_adapting_at_test_time
    title: str  # its first heading
    exercises: tuple[str, ...]  # the functions to complete, in order
    check_sources: dict[str, str]  # exercise -> its pristine check cell's source
    check_ids: dict[str, str]  # exercise -> that cell's id
    own_cell_ids: frozenset[str]  # the lesson's code cells that are not exercises (never run when grading)
    own_cell_sources: frozenset[str]  # the same cells' normalized sources
    imports: str  # the import statements of those cells: the namespace the exercise cells see


def read_lesson(path: Path) -> Lesson:
    """The exercises, check cells and own cells of the package's notebook ``path``."""
    nb = _nbformat().read(path, as_version=4)
    cells = nb.cells
    exercises, check_sources, check_ids, own, imports = [], {}, {}, [], []
    for i, cell in enumerate(cells):
        if cell.cell_type != "code":
            continue
        tags, source = _tags(cell), _source(cell)
        if EXERCISE_TAG in tags:
            name = _defined_function(source)
            following = cells[i + 1] if i + 1 < len(cells) else None
            if name is None or following is None or CHECK_TAG not in _tags(following):
                raise ValueError(f"{path.name}: the exercise cell {i} must define a function and be followed by "
                                 "its check cell (tagged 'check')")
            exercises.append(name)
            check_sources[name], check_ids[name] = _source(following), following.get("id", "")
            continue
        own.append(cell)
        if CHECK_TAG not in tags and "parameters" not in tags:
            imports += _import_statements(source)
    headings = [_source(c).splitlines()[0] for c in cells if c.cell_type == "markdown" and _source(c).startswith("# ")]
    return Lesson(path.stem, headings[0].lstrip("# ").strip() if headings else path.stem, tuple(exercises),
                  check_sources, check_ids, frozenset(c.get("id", "") for c in own) - {""},
                  frozenset(_normalized(_source(c)) for c in own), "\n".join(imports))


def _import_statements(source: str) -> list[str]:
    """The top-level imports of a cell (``import x``, ``from x import y``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [ast.unparse(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]


def course_notebooks(source: Path | None = None) -> list[Path]:
    """The course's notebooks in ``source`` (default: the checkout's notebooks/), overview first."""
    if source is None:
        root = paths.repo_root()
        if root is None:
            raise FileNotFoundError("the course's notebooks live in the source checkout: clone the repository")
        source = root / "notebooks"
    found = sorted(nb for nb in Path(source).glob("[0-9][0-9]_*.ipynb") if nb.stem.startswith(COURSE_NOTEBOOKS))
    if not found:
        raise FileNotFoundError(f"no course notebooks (00_walkthrough, 14_… to 17_…) in {source}")
    return found


def course_lessons(source: Path | None = None) -> dict[str, Lesson]:
    """Every course notebook by name (the overview too: a lesson without exercises)."""
    return {nb.stem: read_lesson(nb) for nb in course_notebooks(source)}


# --------------------------------------------------------------------------- release


def student_copy(nb: Any, lesson: str) -> Any:
    """``nb`` (an nbformat notebook, changed in place and returned) as a student gets it."""
    for i, cell in enumerate(nb.cells):
        for key in EXECUTION_METADATA:
            cell.metadata.pop(key, None)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            if "parameters" in _tags(cell):
                cell.source = _solutions_off(_source(cell), lesson)
        if BEGIN_SOLUTION in _source(cell):
            cell.source = _without_solutions(_source(cell), cell.cell_type, f"{lesson}, cell {i}")
        if EXERCISE_TAG in _tags(cell):
            _refuse_leaked_solution(_source(cell), f"{lesson}, cell {i}")
        if CHECK_TAG in _tags(cell):
            cell.metadata["editable"] = cell.metadata["deletable"] = False
    for key in ("papermill", "widgets"):
        nb.metadata.pop(key, None)
    nb.metadata.setdefault("stamplib", {})["lesson"] = lesson
    return nb


def _solutions_off(source: str, lesson: str) -> str:
    """The parameters cell with ``solutions`` set to False (lessons without exercises have none)."""
    turned, count = re.subn(r"^(solutions\s*:\s*bool\s*=\s*)(True|False)\b", r"\1False", source, flags=re.MULTILINE)
    if count > 1:
        raise ValueError(f"{lesson}: its parameters cell sets 'solutions' {count} times")
    return turned


def _without_solutions(source: str, cell_type: str, where: str) -> str:
    """``source`` with each BEGIN/END SOLUTION block replaced as nbgrader's generate step does."""
    out, inside = [], False
    for line in source.splitlines():
        marker = line.strip()
        if marker == BEGIN_SOLUTION:
            if inside:
                raise ValueError(f"{where}: '{BEGIN_SOLUTION}' inside another solution block")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            out += [indent + s for s in STUB] if cell_type == "code" else ["YOUR ANSWER HERE"]
        elif marker == END_SOLUTION:
            if not inside:
                raise ValueError(f"{where}: '{END_SOLUTION}' without its '{BEGIN_SOLUTION}'")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{where}: '{BEGIN_SOLUTION}' without its '{END_SOLUTION}'")
    return "\n".join(out)


def _refuse_leaked_solution(source: str, where: str) -> None:
    """An exercise cell of a student copy holds functions whose bodies are only a docstring and
    ``raise NotImplementedError()``; anything else would hand out a solution."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise ValueError(f"{where}: the exercise cell does not parse ({err.msg}, line {err.lineno})") from None
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            raise ValueError(f"{where}: the exercise cell holds code besides its function; put it between "
                             f"'{BEGIN_SOLUTION}' and '{END_SOLUTION}' or in another cell")
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        if [ast.unparse(s) for s in body] != ["raise NotImplementedError()"]:
            raise ValueError(f"{where}: the exercise cell shows code of {node.name}() outside "
                             f"'{BEGIN_SOLUTION}' … '{END_SOLUTION}': a student copy must not show it")


def student_readme(lessons: Sequence[Lesson]) -> str:
    """The README of a release: what the notebooks are, how to work on them, how to hand them in."""
    rows = "\n".join(f"| `{lesson.name}.ipynb` | {lesson.title} | {len(lesson.exercises) or '—'} |"
                     for lesson in lessons)
    return f"""# A short course on outlier-aware test-time adaptation: your copies

The overview and the four lessons of the course on STAMP (Yu et al., ECCV 2024) and the methods
it is compared with. Each lesson is one idea, its theory beside the code that computes it, and two
or three exercises.

| notebook | lesson | exercises |
| --- | --- | --- |
{rows}

## How to work

- Open the notebooks in JupyterLab in the course's environment (the instructor says where) and run
  each from the top; a lesson reads the results the instructor computed, so it opens in seconds.
- An exercise is a function to complete: replace `# YOUR CODE HERE` and
  `raise NotImplementedError()` with your code, then run the check cell below it. The check tries
  your function on fresh random inputs and says in one line what is wrong, or that it is right.
- Keep `solutions = False` in the parameters cell, and leave the check cells as they are (they
  are locked). The grader runs every check again itself, in a fresh kernel with a time limit: a
  deleted or edited check cell fails its exercise, and so does a function that never returns.
- Write each function in its exercise cell; helper functions may go in cells of their own.

## Handing in

Hand in the lesson notebooks (`14_…` to `17_…`) you worked on, under any name: each notebook
knows which lesson it is. The overview has no exercises and is not graded.
"""


def release(out: Path, force: bool = False, source: Path | None = None) -> list[Path]:
    """Write the student copies of the course's notebooks and their README into ``out``; refuses a
    folder that holds anything unless ``force`` (then it rewrites the same files, byte for byte
    when the notebooks have not changed). Returns the files written."""
    nbformat = _nbformat()
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file; give a folder for the student copies")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ValueError(f"{out} is not empty; give an empty or new folder, or --force to overwrite the release's "
                         "files there")
    notebooks = course_notebooks(source)
    copies = [(nb, student_copy(nbformat.read(nb, as_version=4), nb.stem)) for nb in notebooks]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for nb, copy in copies:
        target = out / nb.name
        target.write_text(nbformat.writes(copy) + "\n", encoding="utf-8")
        written.append(target)
    readme = out / "README.md"
    readme.write_text(student_readme([read_lesson(nb) for nb in notebooks]), encoding="utf-8")
    return [*written, readme]


# --------------------------------------------------------------------------- grade


@dataclass(frozen=True)
class Grade:
    """One row of grades.csv; ``outcome`` is its kind, for the summary (not a column)."""

    file: str
    lesson: str
    exercise: str
    passed: bool | None  # None: nothing to grade (the overview), neither passed nor failed
    message: str
    outcome: str

    def row(self) -> dict[str, str]:
        return {"file": self.file, "lesson": self.lesson, "exercise": self.exercise,
                "passed": "" if self.passed is None else str(self.passed), "message": self.message}


@dataclass
class _Run:
    """What executing one grading notebook gave."""

    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # exercise -> the grader's JSON
    errors: dict[int, str] = field(default_factory=dict)  # student cell index -> "Name: value"
    stopped: str = ""  # why execution stopped early ("" when it ran to the end)
    stopped_in: str = ""  # the exercise whose check was running, if that is where it stopped
    stopped_at: int | None = None  # else the submission's cell that was running


def identify(nb: Any, path: Path, lessons: dict[str, Lesson]) -> Lesson | None:
    """The lesson a submission is: by the release's metadata, else by its file name's number, else
    by the exercises it defines."""
    named = nb.get("metadata", {}).get("stamplib", {}).get("lesson")
    if named in lessons:
        return lessons[named]
    number = re.match(r"\d\d(?!\d)", path.stem)
    by_prefix = [lesson for name, lesson in lessons.items() if name in path.stem or (number and name[:2] == number[0])]
    if len(by_prefix) == 1:
        return by_prefix[0]
    defined = {_defined_function(_source(c)) for c in nb.get("cells", []) if c.get("cell_type") == "code"}
    matches = [lesson for lesson in lessons.values() if lesson.exercises and set(lesson.exercises) <= defined]
    return matches[0] if len(matches) == 1 else None


def check_cell_state(nb: Any, lesson: Lesson, exercise: str) -> str:
    """``"kept"``, ``"edited"`` or ``"deleted"``: the submission's check cell of ``exercise`` against
    the package's. The cell is found by its id, else by its tag or a ``check("exercise"`` call."""
    pristine = _code_of(lesson.check_sources[exercise])
    code = [c for c in nb.cells if c.cell_type == "code"]
    by_id = [c for c in code if lesson.check_ids[exercise] and c.get("id") == lesson.check_ids[exercise]]
    if by_id:
        return "kept" if _code_of(_source(by_id[0])) == pristine else "edited"
    found = [c for c in code if _check_call(_source(c)) == exercise
             or (CHECK_TAG in _tags(c) and exercise in _source(c))]
    if not found:
        return "deleted"
    return "kept" if any(_code_of(_source(c)) == pristine for c in found) else "edited"


def _code_of(source: str) -> str:
    """What a cell does, for comparing check cells: its syntax tree, so that a comment, a blank line
    or another layout is not an edit (a student notes things beside a check); its normalized text
    when it does not parse."""
    try:
        return ast.dump(ast.parse(source))
    except SyntaxError:
        return _normalized(source)


def _is_students(cell: Any, lesson: Lesson) -> bool:
    """Whether the grader runs this submission cell: a cell that holds an exercise (even merged
    with its check) and the cells the student added; not the parameters, the lesson's own cells
    or a cell that only calls a check."""
    if cell.cell_type != "code":
        return False
    tags, source = _tags(cell), _source(cell)
    if {"parameters", "injected-parameters"} & set(tags):
        return False
    if EXERCISE_TAG in tags or any(_defines(source, name) for name in lesson.exercises):
        return True
    if CHECK_TAG in tags or _check_call(source):
        return False
    return cell.get("id") not in lesson.own_cell_ids and _normalized(source) not in lesson.own_cell_sources


def _defines(source: str, name: str) -> bool:
    """Whether ``source`` has a top-level ``def name(`` (by text: a cell with a syntax error counts)."""
    return re.search(rf"^def\s+{re.escape(name)}\s*\(", source, re.MULTILINE) is not None


def _is_stub(source: str, name: str) -> bool:
    """Whether ``source`` defines ``name`` with the release's body only (a docstring and
    ``raise NotImplementedError()``); a cell that does not parse is not a stub (it is an attempt)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            return [ast.unparse(statement) for statement in body] == ["raise NotImplementedError()"]
    return False


def _prelude(lesson: Lesson, grader: str, marker: str) -> str:
    """The grader's first cell: the lesson's imports, and its check function captured before any
    student code runs (a student's later replacement of ``check`` or of an exercise's entry does
    not reach it)."""
    return f'''solutions = False  # the grader checks the student's functions, never the stored solutions
{lesson.imports}


def _make_grader():
    import json
    from stamplib.teaching import exercises

    check, pristine, user = exercises.check, dict(exercises.EXERCISES), globals()

    def grade(name):
        exercises.EXERCISES[name] = pristine[name]
        answer, solution = user.get(name), pristine[name].solution
        if answer is None:
            found = {{"defined": False}}
        elif answer is solution or getattr(answer, "__code__", None) is getattr(solution, "__code__", 0):
            found = {{"reference": True}}
        else:
            try:
                result = check(name, answer, solutions=False)
                found = {{"passed": result.passed, "started": result.started, "problems": list(result.problems),
                         "seed": result.seed}}
            except BaseException as err:
                found = {{"raised": f"{{type(err).__name__}}: {{err}}"}}
        print("\\n{marker}" + json.dumps(found))

    return grade


{grader} = _make_grader()
del _make_grader
'''


def grading_notebook(nb: Any, lesson: Lesson, marker: str, grader: str) -> tuple[Any, dict[int, int], dict[int, str]]:
    """The notebook the grader executes for submission ``nb``: its prelude, the student's cells in
    their order, and after each exercise's cell the grader's check of it (at the end for an
    exercise no cell defines). Returns it, the map from its cells to the submission's, and the
    grader cells by index (-> the exercise they check)."""
    nbformat = _nbformat()
    students = [(i, c) for i, c in enumerate(nb.cells) if _is_students(c, lesson)]
    home: dict[str, int] = {}  # exercise -> the submission cell after which it is checked
    for name in lesson.exercises:
        defining = [i for i, c in students if _defines(_source(c), name)]
        # wherever the student wrote it: the last cell that defines it with more than the stub (a
        # cell below the check cell, the stub left above, is an answer); the stub only if nothing else
        written = [i for i in defining if not _is_stub(_source(nb.cells[i]), name)]
        if written or defining:
            home[name] = (written or defining)[-1]
    cells = [nbformat.v4.new_code_cell(_prelude(lesson, grader, marker))]
    origin: dict[int, int] = {}
    checks: dict[int, str] = {}

    def add_check(name: str) -> None:
        checks[len(cells)] = name
        cells.append(nbformat.v4.new_code_cell(f"{grader}({name!r})"))

    for i, cell in students:
        origin[len(cells)] = i
        cells.append(nbformat.v4.new_code_cell(_source(cell)))
        for name in lesson.exercises:
            if home.get(name) == i:
                add_check(name)
    for name in lesson.exercises:
        if name not in home:
            add_check(name)
    graded = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "language": "python",
                                                                             "display_name": "Python 3"}})
    return graded, origin, checks


def _error_of(cell: Any) -> str | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return f"{output.get('ename')}: {output.get('evalue')}".rstrip(": ")
    return None


def _marked(cell: Any, marker: str) -> dict[str, Any] | None:
    """The last JSON line after ``marker`` in a grader cell's standard output."""
    text = "".join(o.get("text", "") for o in cell.get("outputs", [])
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")
    found = [line[len(marker):] for line in text.splitlines() if line.startswith(marker)]
    if not found:
        return None
    try:
        return json.loads(found[-1])
    except json.JSONDecodeError:
        return None


def _execute(graded: Any, checks: dict[int, str], origin: dict[int, int], marker: str, time_limit: float,
             workdir: Path) -> _Run:
    """Run ``graded`` in a fresh kernel: the prelude on its own allowance, then the rest under one
    deadline of ``time_limit`` seconds."""
    nbclient = require("nbclient", "notebooks", _PURPOSE)
    require_installed("ipykernel", "notebooks", _PURPOSE)
    dead_kernel = nbclient.exceptions.DeadKernelError  # through the checked import: nbclient is an extra

    # Past its time a cell is interrupted and answered with this error (nbclient's
    # interrupt_on_timeout), so that its polling ends cleanly; the shutdown then kills a kernel
    # that ignored the interrupt.
    timed_out = {"ename": "GraderTimeLimit", "evalue": f"over the time limit of {time_limit:g} s", "traceback": []}
    replies: dict[int, str] = {}
    client = nbclient.NotebookClient(graded, kernel_name="python3", allow_errors=True, timeout=SETUP_SECONDS,
                                     interrupt_on_timeout=True, error_on_timeout=timed_out, startup_timeout=120,
                                     shutdown_kernel="immediate", record_timing=False,
                                     resources={"metadata": {"path": str(workdir)}},
                                     on_cell_executed=lambda cell, cell_index, execute_reply: replies.__setitem__(
                                         cell_index, execute_reply.get("content", {}).get("ename", "")))
    run = _Run()
    # the kernel's own stderr carries only ipykernel's start-up warnings (a student's prints
    # arrive as outputs): thirty of them would bury the summary
    with client.setup_kernel(stderr=subprocess.DEVNULL):
        deadline = None
        for index, cell in enumerate(graded.cells):
            if index == 1:
                deadline = time.monotonic() + time_limit
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    run.stopped = f"the time limit of {time_limit:g} s ran out"
                    break
                client.timeout = max(1, math.ceil(left))
            try:
                client.execute_cell(cell, index)
            except dead_kernel:
                run.stopped = "the kernel died (the code exited or ran out of memory)"
                run.stopped_in, run.stopped_at = checks.get(index, ""), origin.get(index)
                break
            if replies.get(index) == timed_out["ename"]:
                run.stopped = (f"the time limit of {time_limit:g} s ran out" if index else
                               f"the grader's setup took over {SETUP_SECONDS} s")
                run.stopped_in, run.stopped_at = checks.get(index, ""), origin.get(index)
                break
            if index == 0 and (error := _error_of(cell)):
                run.stopped = f"the grader's setup failed: {error}"
                break
            if index in checks:
                found = _marked(cell, marker)
                if found is None:
                    found = {"raised": _error_of(cell) or "the check printed no result"}
                run.results[checks[index]] = found
            elif index in origin and (error := _error_of(cell)):
                run.errors[origin[index]] = error
    return run


def _first_line(source: str) -> str:
    lines = [line for line in source.strip().splitlines() if line.strip()]
    return lines[0].strip()[:60] if lines else ""


def _verdict(exercise: str, found: dict[str, Any] | None, run: _Run, nb: Any) -> tuple[bool, str, str]:
    """(passed, message, outcome) of one exercise from what its grader cell printed."""
    if found is None:
        if run.stopped_in == exercise:
            return False, f"its check did not finish: {run.stopped} (an endless loop?)", "time limit"
        return False, f"not graded: {run.stopped}{_where_it_stopped(run, nb)}", (
            "time limit" if "time limit" in run.stopped else "not graded")
    if found.get("defined") is False:
        defining = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and _defines(_source(c), exercise)]
        errors = [run.errors[i] for i in defining if i in run.errors]
        if errors:
            return False, f"not defined: its cell raised {errors[-1]}", "its cell raised"
        return False, f"not defined: no cell defines {exercise}()", "not defined"
    if found.get("reference"):
        return False, f"{exercise} is the reference solution imported from stamplib, not the student's", "wrong"
    if "raised" in found:
        return False, f"the check raised {found['raised']}", "the check raised"
    if found["passed"]:
        return True, "right", "passed"
    if not found["started"]:
        return False, "not written yet", "not written"
    seed = f" (seed {found['seed']})" if found.get("seed") is not None else ""
    return False, "wrong: " + "; ".join(found["problems"]) + seed, "wrong"


def _where_it_stopped(run: _Run, nb: Any) -> str:
    """Where execution stopped, for the rows of the exercises it never reached."""
    if run.stopped_in:
        return f" while checking {run.stopped_in}()"
    if run.stopped_at is not None:
        return f" in cell {run.stopped_at} (`{_first_line(_source(nb.cells[run.stopped_at]))}`)"
    return ""


#: What a file handed in is when it is not graded exercise by exercise (the ``outcome`` of its
#: rows), as the summary counts them; any other outcome is a graded lesson notebook's.
NOT_GRADED = {"not a notebook": "not a notebook", "unreadable": "unreadable", "empty": "empty",
              "unknown lesson": "not a lesson of the course", "no exercises": "overview (no exercises)",
              "duplicate": "duplicate (another copy graded)", "grader failed": "grader failure"}
#: The endings browsers, Jupyter and file managers give a second copy of a file: "14 (1)",
#: "14-Copy1", "14 copy", "14 copy 2".
_COPY_SUFFIX = re.compile(r"(?:\s*\(\d+\)|-Copy\d*|\s+copy(?:\s+\d+)?)+$", re.IGNORECASE)


@dataclass(frozen=True)
class HandIn:
    """One file handed in, as the grader first reads it: its rows when they are known without
    running it (not a notebook, unreadable, empty, not a lesson, the overview, a duplicate), else
    the lesson to grade it as."""

    path: Path
    file: str  # its path under the submissions folder, as grades.csv names it
    lesson: Lesson | None = None
    rows: tuple[Grade, ...] = ()  # empty: run it
    note: str = ""  # added to the message of each row it is graded with (a duplicate it was chosen over)


def _lesson_by_name(path: Path, lessons: dict[str, Lesson]) -> Lesson | None:
    return identify(_nbformat().v4.new_notebook(), path, lessons)


def _empty_rows(file: str, lesson: Lesson | None, why: str) -> tuple[Grade, ...]:
    """An empty hand-in: a row per exercise of its lesson (one row when no lesson is named)."""
    message = (f"empty: {why}; nothing to grade (hand in the lesson's notebook with your answers, saved)")
    if lesson is None or not lesson.exercises:
        return (Grade(file, lesson.name if lesson else "", "", False, message, "empty"),)
    return tuple(Grade(file, lesson.name, e, False, message, "empty") for e in lesson.exercises)


def look_at(path: Path, root: Path, lessons: dict[str, Lesson]) -> HandIn:
    """What the file ``path`` handed in is, before anything runs."""
    nbformat = _nbformat()
    file = path.relative_to(root).as_posix()
    if path.suffix.lower() != ".ipynb":
        return HandIn(path, file, rows=(Grade(file, "", "", False, _not_a_notebook(path, lessons), "not a notebook"),))
    try:
        raw = path.read_bytes()
    except OSError as err:
        return HandIn(path, file, rows=(Grade(file, "", "", False, f"not a readable file: {err}", "unreadable"),))
    if not raw.strip():
        return HandIn(path, file, rows=_empty_rows(file, _lesson_by_name(path, lessons),
                                                   f"the file holds {_count(len(raw), 'byte')}"))
    try:
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
    except Exception as err:  # a submission may be anything; say what is wrong with it
        return HandIn(path, file, rows=(Grade(file, "", "", False, f"not a readable notebook: {type(err).__name__}: "
                                              f"{err}", "unreadable"),))
    lesson = identify(nb, path, lessons)
    blank = not any(_source(c).strip() for c in nb.cells)
    if lesson is None:
        if blank:
            return HandIn(path, file, rows=_empty_rows(file, None, f"the notebook has {_count(len(nb.cells), 'cell')}, "
                                                                   "none with anything in it, and its name names no "
                                                                   "lesson"))
        return HandIn(path, file, rows=(Grade(file, "", "", False, "not a lesson of the course: neither its metadata, "
                                              "its file name nor its functions name one", "unknown lesson"),))
    if not lesson.exercises:
        return HandIn(path, file, lesson, (Grade(file, lesson.name, "", None, f"{lesson.name} has no exercises: "
                                                                              f"nothing "
                                                 "to grade (the course's exercises are in lessons 14 to 17)",
                                                 "no exercises"),))
    if blank:  # no cell at all is an empty notebook, not a lesson whose check cells were deleted
        return HandIn(path, file, lesson, _empty_rows(file, lesson, f"the notebook has "
                                                                     f"{_count(len(nb.cells), 'cell')}, none with "
                                                                     "anything in it"))
    return HandIn(path, file, lesson, note=_misnamed(path, lesson, lessons))


def _misnamed(path: Path, lesson: Lesson, lessons: dict[str, Lesson]) -> str:
    """A note for a notebook whose file name names another lesson than the one it is graded as (lesson
    17 saved as 14's file): said on each of its rows, so that the student and the instructor see it."""
    named = _lesson_by_name(path, lessons)
    if named is None or named.name == lesson.name:
        return ""
    return (f"its file name says lesson {named.name[:2]}, but the notebook is lesson {lesson.name[:2]} "
            f"({lesson.name}): graded as lesson {lesson.name[:2]}")


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'s' if n != 1 else ''}"


def _not_a_notebook(path: Path, lessons: dict[str, Lesson]) -> str:
    """The message of a file that is not an .ipynb: what it is, and what to hand in instead."""
    kind = "".join(path.suffixes[-2:]) or "no extension"
    named = _lesson_by_name(path, lessons)
    lesson = f" (its name says lesson {named.name[:2]})" if named is not None else ""
    try:
        looks_like_one = path.stat().st_size < 50_000_000 and bool(_nbformat().reads(path.read_text("utf-8"),
                                                                                       as_version=4).cells)
    except Exception:  # anything but a notebook's JSON: a PDF, a script, a picture
        looks_like_one = False
    if looks_like_one:
        return (f"not graded: a notebook saved as {kind}{lesson}; rename it to end in .ipynb and hand it in again "
                "(only .ipynb files are graded)")
    return (f"not a notebook ({kind}){lesson}: only .ipynb files are graded; hand in the lesson's notebook "
            "(File > Save, the .ipynb file)")


def _copy_key(hand_in: HandIn) -> tuple[str, str, str]:
    """Two notebooks of one lesson in one folder whose names differ only by a copy's ending are one
    hand-in twice ("14.ipynb", "14 (1).ipynb")."""
    stem = _COPY_SUFFIX.sub("", hand_in.path.stem).strip().lower()
    return hand_in.path.parent.as_posix(), stem, hand_in.lesson.name if hand_in.lesson else ""


def _copy_number(path: Path) -> int:
    """0 for an original, else the copy's number (1 when its ending has none: "14 copy")."""
    ending = _COPY_SUFFIX.search(path.stem)
    digits = re.findall(r"\d+", ending.group(0)) if ending else []
    return int(digits[-1]) if digits else int(ending is not None)


def flag_duplicates(hand_ins: Sequence[HandIn]) -> list[HandIn]:
    """``hand_ins`` with each duplicate's copies but one given a row "duplicate of …": of one
    lesson in one folder, with names that differ only by a copy's ending. The one graded is the
    last modified (on a tie, the highest copy number: browsers and Jupyter number later copies
    higher); its rows say which copies it was chosen over. Notebooks of one lesson under other
    names are all graded (in a folder of everyone's notebooks they are different students')."""
    groups: dict[tuple[str, str, str], list[HandIn]] = {}
    for hand_in in hand_ins:
        if not hand_in.rows and hand_in.lesson is not None:
            groups.setdefault(_copy_key(hand_in), []).append(hand_in)
    replaced: dict[Path, HandIn] = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        chosen = max(group, key=lambda h: (h.path.stat().st_mtime, _copy_number(h.path), h.file))
        others = [h for h in group if h is not chosen]
        for h in others:
            replaced[h.path] = HandIn(h.path, h.file, h.lesson, (Grade(
                h.file, h.lesson.name, "", None, f"duplicate of {chosen.file} (the same lesson, handed in twice in one "
                f"folder): not graded; {chosen.file}, the last modified, is graded in its place", "duplicate"),))
        names = ", ".join(h.file for h in others)
        chosen_note = f"graded in place of its duplicate {names}: this copy is the last modified"
        replaced[chosen.path] = dataclasses.replace(chosen, note="; ".join(n for n in (chosen.note, chosen_note) if n))
    return [replaced.get(h.path, h) for h in hand_ins]


def grade_notebook(path: Path, root: Path, lessons: dict[str, Lesson], time_limit: float,
                   executed: Path | None = None) -> list[Grade]:
    """The rows of one file handed in (for a file that is not graded exercise by exercise, such as
    the overview, its one row)."""
    return _run_hand_in(look_at(path, root, lessons), time_limit, executed)


def _run_hand_in(hand_in: HandIn, time_limit: float, executed: Path | None) -> list[Grade]:
    """The rows of ``hand_in``: those it already has, else each exercise's from running it."""
    if hand_in.rows:
        return list(hand_in.rows)
    nbformat = _nbformat()
    nb, lesson, file = nbformat.read(hand_in.path, as_version=4), hand_in.lesson, hand_in.file
    assert lesson is not None, "a hand-in to run has its lesson"
    marker = f"@@grade-{secrets.token_hex(8)}@@"
    graded, origin, checks = grading_notebook(nb, lesson, marker, f"_grade_{secrets.token_hex(4)}")
    with tempfile.TemporaryDirectory(prefix="stamplib-grade-") as workdir:
        try:
            run = _execute(graded, checks, origin, marker, time_limit, Path(workdir))
        except Exception as err:  # the kernel failed to start, or nbclient failed: a row, not a crash
            run = _Run(stopped=f"the kernel could not run it: {type(err).__name__}: {err}")
    if executed is not None:
        target = executed / file
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(graded, target)
    rows = []
    for exercise in lesson.exercises:
        passed, message, outcome = _verdict(exercise, run.results.get(exercise), run, nb)
        state = check_cell_state(nb, lesson, exercise)
        if state != "kept":
            grader_says = "right" if passed else message
            passed, message, outcome = (False, f"its check cell was {state} (restore "
                                        f"`{_normalized(lesson.check_sources[exercise])}`); the grader's own check "
                                        f"says: {grader_says}", f"check cell {state}")
        if hand_in.note:
            message += f" ({hand_in.note})"
        rows.append(Grade(file, lesson.name, exercise, passed, message, outcome))
    return rows


def _checks_pass_their_solutions(exercises: Sequence[str]) -> None:
    """Each check passes its own reference solution here, before any student is graded: a broken
    check would fail every student's right answer."""
    from stamplib.teaching import check

    for name in exercises:
        try:
            check(name, solutions=True, seed=0)
        except (AssertionError, KeyError) as err:
            raise ValueError(f"the package's check of {name!r} is broken, so grading would fail right answers: "
                             f"{err}. Fix stamplib/teaching first (tests/teaching/test_exercises.py)") from None


def _grade_safely(hand_in: HandIn, time_limit: float, executed: Path | None) -> list[Grade]:
    """:func:`_run_hand_in`, with a failure of the grader on an odd file as that file's row."""
    try:
        return _run_hand_in(hand_in, time_limit, executed)
    except Exception as err:  # one strange submission must not stop the grading of thirty
        return [Grade(hand_in.file, "", "", False, f"the grader failed on it: {type(err).__name__}: {err}",
                      "grader failed")]


def handed_in(folder: Path, out: Path | None = None) -> list[Path]:
    """Every file under ``folder`` (any depth), notebooks or not, without Jupyter's checkpoints
    (``.ipynb_checkpoints``: its autosaved copies), the grades file ``out`` itself and the grades
    files of earlier gradings (:func:`earlier_grades`)."""
    folder = Path(folder)
    own = Path(out).resolve() if out is not None else None
    earlier = set(earlier_grades(folder))
    return sorted(p for p in folder.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in
                  p.relative_to(folder).parts and p.resolve() != own and p not in earlier)


def earlier_grades(folder: Path) -> list[Path]:
    """The grades files an earlier grading wrote under ``folder`` (a CSV whose header is
    :data:`GRADES_COLUMNS`): not a student's hand-in, even when this grading writes its own elsewhere
    (``--out``)."""
    header = ",".join(GRADES_COLUMNS)
    found = []
    for path in sorted(Path(folder).rglob("*.csv")):
        try:
            with open(path, encoding="utf-8", newline="") as fh:
                first = fh.readline().strip()
        except (OSError, UnicodeDecodeError):
            continue
        if first == header:
            found.append(path)
    return found


def grade(folder: Path, out: Path, time_limit: float, jobs: int = 1, executed: Path | None = None,
          source: Path | None = None) -> list[Grade]:
    """Grade every file under ``folder``, ``jobs`` notebooks at once, and write ``out``
    (grades.csv): each file handed in has one row or more, whatever it is."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder of submitted notebooks")
    if time_limit <= 0 or jobs < 1:
        raise ValueError(f"the time limit ({time_limit}) and jobs ({jobs}) must be positive")
    if executed is not None and Path(executed).resolve().is_relative_to(folder.resolve()):
        raise ValueError(f"keep the executed notebooks outside {folder}: a later grading would take them for "
                         "submissions")
    found = handed_in(folder, out)
    if not found:
        raise FileNotFoundError(f"nothing handed in under {folder}: it holds no file")
    lessons = course_lessons(source)
    hand_ins = flag_duplicates([look_at(p, folder, lessons) for p in found])
    to_run = {h.lesson.name: h.lesson for h in hand_ins if not h.rows and h.lesson is not None}
    _checks_pass_their_solutions([e for lesson in to_run.values() for e in lesson.exercises])
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        per_file = list(pool.map(lambda h: _grade_safely(h, time_limit, executed), hand_ins))
    rows = [row for rows in per_file for row in rows]
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=GRADES_COLUMNS)
    writer.writeheader()
    writer.writerows(row.row() for row in rows)
    paths.atomic_write_bytes(Path(out), text.getvalue().encode("utf-8"))
    return rows


def file_kinds(rows: Sequence[Grade]) -> dict[str, str]:
    """Each file of ``rows`` -> what it is: a key of :data:`NOT_GRADED`, or "graded"."""
    kinds: dict[str, str] = {}
    for r in rows:
        kinds.setdefault(r.file, r.outcome if r.outcome in NOT_GRADED else "graded")
    return kinds


def summary(rows: Sequence[Grade]) -> list[str]:
    """How many files were handed in and what each is, then per lesson and exercise how many
    passed and the reasons of the rest, then each file that was not graded with its reason."""
    kinds = Counter(file_kinds(rows).values())
    counted = [f"{kinds['graded']} lesson notebook{'s' if kinds['graded'] != 1 else ''} "
               f"graded"] if kinds["graded"] else []
    counted += [f"{n} {NOT_GRADED[kind]}" for kind, n in kinds.items() if kind != "graded"]
    total = sum(kinds.values())
    lines = [f"{total} file{'s' if total != 1 else ''} handed in: " + ", ".join(counted)]
    for lesson in sorted({r.lesson for r in rows if r.lesson and r.exercise}):
        lines.append(lesson)
        ours = [r for r in rows if r.lesson == lesson and r.exercise]
        width = max(len(r.exercise) for r in ours)
        for exercise in dict.fromkeys(r.exercise for r in ours):
            of = [r for r in ours if r.exercise == exercise]
            rest = Counter(r.outcome for r in of if not r.passed)
            why = ", ".join(f"{kind} {n}" for kind, n in rest.most_common())
            lines.append(
                f"  {exercise:<{width}}  {sum(bool(r.passed) for r in of):>3} of {len(of)} passed"
                + (f"  ({why})" if why else "")
            )
    shown = set()
    for r in rows:
        if not r.exercise and r.file not in shown:
            shown.add(r.file)
            lines.append(f"{r.file}: {r.message}")
    return lines
