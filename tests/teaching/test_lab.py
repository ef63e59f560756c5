"""The instructor's lab (stamplib.teaching.lab, ``python -m stamplib course``): the release hands out
student copies without solutions, and grading a folder of made-up submissions of lesson 14 (the
cheapest checks) gives the expected grades.csv: a correct one passes, an empty one is "not written
yet" even with ``solutions`` turned on, and a syntax error, an endless loop, a deleted or edited
check cell and a tampered check are rows with their reasons, never a crash and never a pass; an
answer written below its check cell (the stub left in place) is graded, a comment added to a check
cell is not an edit, and a handed-in overview gets a row saying it has no exercises."""

from __future__ import annotations

import copy
import csv
import json
import re
from pathlib import Path

import pytest

from stamplib.cli import main
from stamplib.notebook_runner import notebooks_dir
from stamplib.teaching import lab
from stamplib.teaching.exercises import solution_source

LESSON = "14_course_adapting_at_test_time"
BN, ENTROPY, LOGITS = "batch_norm_with_batch_statistics", "softmax_entropy", "entropy_from_logits"
TIME_LIMIT = 10  # seconds per notebook: lesson 14's three checks take well under one


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _cell_of(nb: dict, tag: str, name: str) -> dict:
    return next(c for c in nb["cells"] if tag in c["metadata"].get("tags", []) and name in _source(c))


def test_release_writes_student_copies_and_refuses_a_folder_that_is_not_empty(tmp_path: Path, capsys) -> None:
    out = tmp_path / "release"
    assert main(["course", "release", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["00_walkthrough.ipynb", *sorted(nb.name for nb in notebooks_dir().glob("1[4-7]_course_*.ipynb")),
                     "README.md"]
    for copy_path in out.glob("*.ipynb"):
        committed, student = _read(notebooks_dir() / copy_path.name), _read(copy_path)
        assert student["metadata"]["stamplib"]["lesson"] == copy_path.stem
        assert [c["metadata"].get("tags") for c in student["cells"]] == [c["metadata"].get("tags") for c in committed["cells"]]
        assert [_source(c) for c in student["cells"]] == [_source(c) for c in committed["cells"]]
        for cell in student["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None
            if "check" in cell["metadata"].get("tags", []):
                assert cell["metadata"]["editable"] is False and cell["metadata"]["deletable"] is False
    parameters = _cell_of(_read(out / f"{LESSON}.ipynb"), "parameters", "solutions")
    assert re.search(r"^solutions: bool = False", _source(parameters), re.MULTILINE)
    readme = (out / "README.md").read_text()
    assert "14 — Course 1: adapting at test time" in readme and "solutions = False" in readme

    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(["course", "release", str(out)]) == 2
    refused = capsys.readouterr().err
    assert "is not empty" in refused and "--force" in refused
    assert main(["course", "release", str(out), "--force"]) == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # idempotent


def test_release_cuts_solution_blocks_and_refuses_to_show_a_solution(tmp_path: Path) -> None:
    source = tmp_path / "notebooks"
    source.mkdir()
    nb = _read(notebooks_dir() / f"{LESSON}.ipynb")
    stub = _source(_cell_of(nb, "exercise", ENTROPY))
    header = stub.split("    # YOUR CODE HERE")[0]
    exercise = _cell_of(nb, "exercise", ENTROPY)
    exercise["source"] = header + "    ### BEGIN SOLUTION\n    return -(probs * probs.log()).sum(1)\n    ### END SOLUTION\n"
    exercise["outputs"], exercise["execution_count"] = [{"output_type": "stream", "name": "stdout", "text": "x"}], 3
    parameters = _cell_of(nb, "parameters", "solutions")
    parameters["source"] = _source(parameters).replace("solutions: bool = False", "solutions: bool = True")
    (source / f"{LESSON}.ipynb").write_text(json.dumps(nb))
    lab.release(tmp_path / "out", source=source)
    student = _read(tmp_path / "out" / f"{LESSON}.ipynb")
    cut = _cell_of(student, "exercise", ENTROPY)
    assert _source(cut) == stub.rstrip("\n") and cut["outputs"] == [] and cut["execution_count"] is None
    assert "solutions: bool = False" in _source(_cell_of(student, "parameters", "solutions"))

    exercise["source"] = header + "    return -(probs * probs.log()).sum(1)\n"  # a solution without its markers
    (source / f"{LESSON}.ipynb").write_text(json.dumps(nb))
    with pytest.raises(ValueError, match=r"shows code of softmax_entropy\(\).*must not show it"):
        lab.release(tmp_path / "again", source=source)
    assert not (tmp_path / "again").exists()


def test_a_check_cell_is_found_by_its_id_or_its_call_and_compared_with_the_package() -> None:
    nbformat = pytest.importorskip("nbformat")
    lesson = lab.course_lessons()[LESSON]
    assert lesson.exercises == (BN, ENTROPY, LOGITS)
    nb = nbformat.read(notebooks_dir() / f"{LESSON}.ipynb", as_version=4)
    assert [lab.check_cell_state(nb, lesson, e) for e in lesson.exercises] == ["kept"] * 3
    renumbered = copy.deepcopy(nb)
    for i, cell in enumerate(renumbered.cells):
        cell["id"] = f"new-{i}"  # an editor that gives every cell a new id
    assert lab.check_cell_state(renumbered, lesson, ENTROPY) == "kept"
    check = next(c for c in renumbered.cells if lab._check_call(lab._source(c)) == ENTROPY)
    pristine = check.source
    check.source = "# a note of mine\n" + pristine + "  # and another\n\n"
    assert lab.check_cell_state(renumbered, lesson, ENTROPY) == "kept"  # a comment is not an edit
    check.source = 'check("softmax_entropy", softmax_entropy, True)'
    assert lab.check_cell_state(renumbered, lesson, ENTROPY) == "edited"
    renumbered.cells.remove(check)
    assert lab.check_cell_state(renumbered, lesson, ENTROPY) == "deleted"
    lessons = lab.course_lessons()
    assert lab.identify(renumbered, Path("alice.ipynb"), lessons).name == LESSON  # by its functions
    assert lab.identify(nbformat.v4.new_notebook(), Path("bob/14.ipynb"), lessons).name == LESSON  # by its number
    assert lab.identify(nbformat.v4.new_notebook(), Path("bob/notes.ipynb"), lessons) is None


# --------------------------------------------------------------------------- the round trip


def _with_exercise(nb: dict, name: str, body: str) -> dict:
    _cell_of(nb, "exercise", name)["source"] = body
    return nb


def _solved(nb: dict) -> dict:
    nb = copy.deepcopy(nb)
    for name in (BN, ENTROPY, LOGITS):
        _with_exercise(nb, name, solution_source(name))
    return nb


def _submissions(release: Path, folder: Path) -> None:
    """Made-up submissions of lesson 14, one per way a notebook comes back."""
    empty = _read(release / f"{LESSON}.ipynb")
    made: dict[str, dict] = {"correct": _solved(empty)}
    made["empty"] = copy.deepcopy(empty)  # nothing written, and the stored solutions asked for
    parameters = _cell_of(made["empty"], "parameters", "solutions")
    parameters["source"] = _source(parameters).replace("solutions: bool = False", "solutions: bool = True")
    made["syntax_error"] = _with_exercise(_solved(empty), ENTROPY,
                                          "def softmax_entropy(probs):\n    return -(probs * probs.log().sum(1)\n")
    made["endless_loop"] = _with_exercise(_solved(empty), ENTROPY,
                                          "def softmax_entropy(probs):\n    while True:\n        pass\n")
    made["deleted_check"] = _solved(empty)
    made["deleted_check"]["cells"].remove(_cell_of(made["deleted_check"], "check", ENTROPY))
    made["edited_check"] = _solved(empty)
    _with_exercise(made["edited_check"], ENTROPY, "def softmax_entropy(probs):\n    return probs.sum(1)\n")
    _cell_of(made["edited_check"], "check", ENTROPY)["source"] = 'print("✓ `softmax_entropy` is right")'
    # the plain ways around the checks, with the check cells untouched
    made["tampered"] = _with_exercise(_solved(empty), BN, (
        "import dataclasses\nimport stamplib.teaching.exercises as ex\n\n"
        "ex.check = lambda *args, **kwargs: 'right'\n"
        f"ex.EXERCISES['{BN}'] = dataclasses.replace(ex.EXERCISES['{BN}'], find_problems=lambda answer, g: [])\n\n\n"
        f"def {BN}(x, weight, bias, eps=1e-5):\n    return x\n"))
    _with_exercise(made["tampered"], LOGITS, f"from stamplib.teaching.adapting import {LOGITS}\n")
    # the answer in a new cell below the check cell, the stub left in its exercise cell
    made["below_check"] = _solved(empty)
    _with_exercise(made["below_check"], BN, _source(_cell_of(empty, "exercise", BN)))
    below = made["below_check"]["cells"].index(_cell_of(made["below_check"], "check", BN)) + 1
    made["below_check"]["cells"].insert(below, {"cell_type": "code", "id": "mine", "metadata": {},
                                                "execution_count": None, "outputs": [],
                                                "source": "import torch\n\n\n" + solution_source(BN)})
    # a comment and a blank line added to a check cell: not an edit
    made["commented_check"] = _solved(empty)
    commented = _cell_of(made["commented_check"], "check", ENTROPY)
    commented["source"] = "# I ran this twice; the second time it passed\n\n" + _source(commented) + "  # done\n"
    for name, nb in made.items():
        (folder / f"{name}.ipynb").write_text(json.dumps(nb))
    (folder / "student_3").mkdir()
    (folder / "student_3" / "overview.ipynb").write_text((release / "00_walkthrough.ipynb").read_text())
    (folder / "student_7").mkdir()
    (folder / "student_7" / "notes.ipynb").write_text("{ not json")


EXPECTED = {  # file -> exercise -> (passed, the message's pattern)
    "correct.ipynb": {BN: (True, "^right$"), ENTROPY: (True, "^right$"), LOGITS: (True, "^right$")},
    "empty.ipynb": {e: (False, "^not written yet$") for e in (BN, ENTROPY, LOGITS)},
    "syntax_error.ipynb": {BN: (True, "^right$"), ENTROPY: (False, "^not defined: its cell raised SyntaxError"),
                           LOGITS: (True, "^right$")},
    "endless_loop.ipynb": {BN: (True, "^right$"),
                           ENTROPY: (False, f"^its check did not finish: the time limit of {TIME_LIMIT} s ran out"),
                           LOGITS: (False, rf"^not graded: the time limit .* while checking {ENTROPY}\(\)")},
    "deleted_check.ipynb": {BN: (True, "^right$"),
                            ENTROPY: (False, "^its check cell was deleted .*the grader's own check says: right$"),
                            LOGITS: (True, "^right$")},
    "edited_check.ipynb": {BN: (True, "^right$"),
                           ENTROPY: (False, "^its check cell was edited .*the grader's own check says: wrong: "),
                           LOGITS: (True, "^right$")},
    "tampered.ipynb": {BN: (False, "^wrong: "), ENTROPY: (True, "^right$"),
                       LOGITS: (False, "is the reference solution imported from stamplib")},
    "below_check.ipynb": {e: (True, "^right$") for e in (BN, ENTROPY, LOGITS)},
    "commented_check.ipynb": {e: (True, "^right$") for e in (BN, ENTROPY, LOGITS)},
}


def test_release_then_grade_made_up_submissions(tmp_path: Path, capsys) -> None:
    release, folder = tmp_path / "release", tmp_path / "submissions"
    assert main(["course", "release", str(release)]) == 0
    folder.mkdir()
    _submissions(release, folder)
    capsys.readouterr()
    assert main(["course", "grade", str(folder), "--timeout", str(TIME_LIMIT), "--jobs", "2"]) == 0
    printed = capsys.readouterr().out
    with (folder / "grades.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["file", "lesson", "exercise", "passed", "message"]
    unreadable = [r for r in rows if r["file"] == "student_7/notes.ipynb"]
    assert len(unreadable) == 1 and unreadable[0]["passed"] == "False"
    assert unreadable[0]["message"].startswith("not a readable notebook")
    overview = [r for r in rows if r["file"] == "student_3/overview.ipynb"]
    assert overview == [{"file": "student_3/overview.ipynb", "lesson": "00_walkthrough", "exercise": "", "passed": "",
                         "message": overview[0]["message"]}] and "has no exercises" in overview[0]["message"]
    graded = {}
    for r in rows:
        if r["file"] in EXPECTED:
            assert r["lesson"] == LESSON
            graded.setdefault(r["file"], {})[r["exercise"]] = (r["passed"] == "True", r["message"])
    assert set(graded) == set(EXPECTED) and len(rows) == 3 * len(EXPECTED) + 2
    for file, expected in EXPECTED.items():
        for exercise, (passed, pattern) in expected.items():
            got = graded[file][exercise]
            assert got[0] is passed and re.search(pattern, got[1]), (file, exercise, got)
    assert re.search(rf"{BN}\s+7 of 9 passed", printed) and re.search(rf"{ENTROPY}\s+4 of 9 passed", printed), printed
    assert "student_3/overview.ipynb: 00_walkthrough has no exercises" in printed
    assert "student_7/notes.ipynb: not a readable notebook" in printed


def test_a_check_that_fails_its_own_solution_stops_grading_before_any_student(monkeypatch) -> None:
    import dataclasses

    from stamplib.teaching import EXERCISES

    broken = dataclasses.replace(EXERCISES[ENTROPY], find_problems=lambda answer, generator: ["always"])
    monkeypatch.setitem(EXERCISES, ENTROPY, broken)
    with pytest.raises(ValueError, match="check of 'softmax_entropy' is broken"):
        lab._checks_pass_their_solutions([BN, ENTROPY])


@pytest.mark.slow
def test_a_dead_kernel_and_a_loop_outside_the_exercises_stop_the_grading_of_what_follows_and_a_merged_check_fails(
        tmp_path: Path) -> None:
    release, folder = tmp_path / "release", tmp_path / "submissions"
    lab.release(release)
    folder.mkdir()
    solved = _solved(_read(release / f"{LESSON}.ipynb"))
    after_bn = solved["cells"].index(_cell_of(solved, "check", BN)) + 1
    for name, source in {"exits": "import os\nos._exit(3)", "loops": "while True:\n    pass"}.items():
        nb = copy.deepcopy(solved)
        nb["cells"].insert(after_bn, {"cell_type": "code", "id": "added", "metadata": {}, "execution_count": None,
                                      "outputs": [], "source": source})
        (folder / f"{name}.ipynb").write_text(json.dumps(nb))
    merged = copy.deepcopy(solved)  # the exercise cell and its check cell merged into one
    check = _cell_of(merged, "check", ENTROPY)
    _cell_of(merged, "exercise", ENTROPY)["source"] += "\n\n" + _source(check)
    merged["cells"].remove(check)
    (folder / "merged.ipynb").write_text(json.dumps(merged))
    rows = lab.grade(folder, tmp_path / "grades.csv", TIME_LIMIT)
    got = {(r.file, r.exercise): (r.passed, r.message) for r in rows}
    assert got[("merged.ipynb", BN)] == got[("merged.ipynb", LOGITS)] == (True, "right")
    assert re.search("^its check cell was edited .*the grader's own check says: right$", got[("merged.ipynb", ENTROPY)][1])
    for file, why in (("exits.ipynb", "the kernel died"), ("loops.ipynb", "the time limit")):
        assert got[(file, BN)] == (True, "right")
        for exercise in (ENTROPY, LOGITS):
            passed, message = got[(file, exercise)]
            assert not passed and message.startswith(f"not graded: {why}") and f"in cell {after_bn}" in message, message
