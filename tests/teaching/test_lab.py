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
import os
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
        tags = [c["metadata"].get("tags") for c in committed["cells"]]
        assert [c["metadata"].get("tags") for c in student["cells"]] == tags
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
    exercise["source"] = (header + "    ### BEGIN SOLUTION\n    return -(probs * probs.log()).sum(1)\n"
                          "    ### END SOLUTION\n")
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
    # the same notebook downloaded twice: the later copy is graded, the first gets a row saying so
    (folder / "correct (1).ipynb").write_text(json.dumps(made["correct"]))
    os.utime(folder / "correct.ipynb", (1_700_000_000, 1_700_000_000))
    (folder / "student_3").mkdir()
    (folder / "student_3" / "overview.ipynb").write_text((release / "00_walkthrough.ipynb").read_text())
    (folder / "student_7").mkdir()
    (folder / "student_7" / "notes.ipynb").write_text("{ not json")
    # what else comes back: a script, a PDF, a notebook saved as text, an empty lesson notebook
    (folder / "student_8").mkdir()
    (folder / "student_8" / "answers.py").write_text("def h_score(acc, auroc):\n    return 0.0\n")
    (folder / "student_8" / "15.pdf").write_bytes(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    (folder / "student_8" / "16.ipynb.txt").write_text((release / "16_course_stamp_piece_by_piece.ipynb").read_text())
    (folder / "student_8" / "16_course_stamp_piece_by_piece.ipynb").write_text(json.dumps(
        {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))


EXPECTED = {  # file -> exercise -> (passed, the message's pattern)
    "correct (1).ipynb": {e: (True, r"^right \(graded in place of its duplicate correct\.ipynb: this copy is the last "
                                    r"modified\)$") for e in (BN, ENTROPY, LOGITS)},
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
    by_file: dict[str, list[dict]] = {}
    for r in rows:
        by_file.setdefault(r["file"], []).append(r)
    handed_in = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.name != "grades.csv"}
    assert set(by_file) == handed_in  # every file handed in has its rows
    assert [(r["passed"], r["message"]) for r in by_file["correct.ipynb"]] == [
        ("", "duplicate of correct (1).ipynb (the same lesson, handed in twice in one folder): not graded; "
             "correct (1).ipynb, the last modified, is graded in its place")]
    student_8 = {f.removeprefix("student_8/"): rs for f, rs in by_file.items() if f.startswith("student_8/")}
    assert [r["message"] for r in student_8["answers.py"]] == [
        "not a notebook (.py): only .ipynb files are graded; hand in the lesson's notebook (File > Save, the .ipynb "
        "file)"]
    assert student_8["15.pdf"][0]["message"].startswith("not a notebook (.pdf) (its name says lesson 15)")
    assert student_8["16.ipynb.txt"][0]["message"].startswith(
        "not graded: a notebook saved as .ipynb.txt (its name says lesson 16); rename it to end in .ipynb")
    empty = student_8["16_course_stamp_piece_by_piece.ipynb"]
    assert [r["exercise"] for r in empty] == ["cosine_step_size", "eviction_candidates", "self_weighted_entropy"]
    assert all(r["passed"] == "False" and r["message"].startswith("empty: the notebook has 0 cells") for r in empty)
    assert not any("deleted" in r["message"] for r in empty)
    assert printed.splitlines()[0] == ("16 files handed in: 9 lesson notebooks graded, 1 duplicate (another copy "
                                       "graded), 1 overview (no exercises), 1 unreadable, 3 not a notebook, 1 empty"), \
        printed
    assert re.search(r"cosine_step_size\s+0 of 1 passed  \(empty 1\)", printed), printed
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
    assert set(graded) == set(EXPECTED) and len(rows) == 3 * len(EXPECTED) + 2 + 1 + 3 + 3
    for file, expected in EXPECTED.items():
        for exercise, (passed, pattern) in expected.items():
            got = graded[file][exercise]
            assert got[0] is passed and re.search(pattern, got[1]), (file, exercise, got)
    assert re.search(rf"{BN}\s+7 of 9 passed", printed) and re.search(rf"{ENTROPY}\s+4 of 9 passed", printed), printed
    assert "student_3/overview.ipynb: 00_walkthrough has no exercises" in printed
    assert "student_7/notes.ipynb: not a readable notebook" in printed


def test_every_file_handed_in_is_sorted_before_anything_runs(tmp_path: Path) -> None:
    """No kernel here: what each file is (a notebook to grade, a duplicate, not a notebook, empty,
    unreadable) is decided by reading it, and the summary counts every file."""
    folder, lessons = tmp_path / "in", lab.course_lessons()
    released = (notebooks_dir() / f"{LESSON}.ipynb").read_text()
    for name, text in {"alice/14.ipynb": released, "alice/14 (1).ipynb": released, "alice/14-Copy1.ipynb": released,
                       "bob/14.ipynb": released, "bob/14 copy.ipynb": "", "bob/16_mine.ipynb": "\n",
                       "bob/17.ipynb": json.dumps({"cells": [{"cell_type": "code", "id": "a", "source": "  ",
                                                              "metadata": {},
                                                             "outputs": [], "execution_count": None}],
                                                  "metadata": {}, "nbformat": 4, "nbformat_minor": 5}),
                       "carol/answers.py": "x = 1\n", "carol/notes.ipynb": "{ not json",
                       "carol/.ipynb_checkpoints/14-checkpoint.ipynb": released, "grades.csv": "file\n"}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    for age, name in enumerate(("alice/14-Copy1.ipynb", "alice/14 (1).ipynb", "alice/14.ipynb")):
        os.utime(folder / name, (1_700_000_000 - 60 * age,) * 2)  # 14-Copy1 is the last modified
    found = lab.handed_in(folder, folder / "grades.csv")
    assert [p.relative_to(folder).as_posix() for p in found] == [
        "alice/14 (1).ipynb", "alice/14-Copy1.ipynb", "alice/14.ipynb", "bob/14 copy.ipynb", "bob/14.ipynb",
        "bob/16_mine.ipynb", "bob/17.ipynb", "carol/answers.py", "carol/notes.ipynb"]
    hand_ins = {h.file: h for h in lab.flag_duplicates([lab.look_at(p, folder, lessons) for p in found])}
    to_run = sorted(f for f, h in hand_ins.items() if not h.rows)
    assert to_run == ["alice/14-Copy1.ipynb", "bob/14.ipynb"]  # bob's other 14 is empty: not a copy to choose
    assert hand_ins["alice/14-Copy1.ipynb"].note == ("graded in place of its duplicate alice/14 (1).ipynb, "
                                                      "alice/14.ipynb: this copy is the last modified")
    for copy_name in ("alice/14 (1).ipynb", "alice/14.ipynb"):
        (row,) = hand_ins[copy_name].rows
        assert (row.passed, row.outcome) == (None, "duplicate")
        assert row.message.startswith("duplicate of alice/14-Copy1.ipynb (the same lesson, handed in twice")
    assert [(r.exercise, r.message) for r in hand_ins["bob/14 copy.ipynb"].rows] == [
        (e, "empty: the file holds 0 bytes; nothing to grade (hand in the lesson's notebook with your answers, saved)")
        for e in (BN, ENTROPY, LOGITS)]
    assert [r.lesson for r in hand_ins["bob/16_mine.ipynb"].rows] == ["16_course_stamp_piece_by_piece"] * 3
    assert hand_ins["bob/17.ipynb"].rows[0].message.startswith("empty: the notebook has 1 cell, none with anything")
    assert hand_ins["carol/answers.py"].rows[0].outcome == "not a notebook"
    assert hand_ins["carol/notes.ipynb"].rows[0].outcome == "unreadable"
    rows = [r for h in hand_ins.values() for r in h.rows]
    rows += [lab.Grade(f, LESSON, e, True, "right", "passed") for f in to_run for e in (BN, ENTROPY, LOGITS)]
    lines = lab.summary(rows)
    assert sorted(lines[0].removeprefix("9 files handed in: ").split(", ")) == sorted([
        "2 lesson notebooks graded", "2 duplicate (another copy graded)", "3 empty", "1 not a notebook",
        "1 unreadable"]), lines
    assert f"  {BN}    2 of 3 passed  (empty 1)" in lines, lines
    assert "alice/14.ipynb: duplicate of alice/14-Copy1.ipynb" in "\n".join(lines)


def test_a_folder_without_a_notebook_still_gets_a_row_per_file(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "answers.py").write_text("x = 1\n")
    (folder / "15.pdf").write_bytes(b"%PDF-1.4\n")
    assert main(["course", "grade", str(folder)]) == 0
    printed = capsys.readouterr().out
    with (folder / "grades.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["file"], r["passed"]) for r in rows] == [("15.pdf", "False"), ("answers.py", "False")]
    assert printed.splitlines()[0] == "2 files handed in: 2 not a notebook", printed
    assert main(["course", "grade", str(folder)]) == 0  # again: its own grades.csv is not a file handed in
    assert "2 files handed in" in capsys.readouterr().out
    # again, writing elsewhere: the earlier grades.csv in the folder is not a hand-in either (issue 83)
    assert main(["course", "grade", str(folder), "--out", str(tmp_path / "second.csv")]) == 0
    out, err = capsys.readouterr()
    assert "2 files handed in" in out and "grades.csv" not in (tmp_path / "second.csv").read_text()
    assert err.startswith(f"not graded: {folder / 'grades.csv'}, the grades of an earlier grading")


def test_a_lesson_saved_under_another_lessons_name_is_graded_with_a_note(tmp_path: Path) -> None:
    """Lesson 17 saved as 14's file was graded as 17 without a word (issue 83)."""
    folder, lessons, released = tmp_path / "in", lab.course_lessons(), tmp_path / "released"
    folder.mkdir()
    lab.release(released)  # the student's copies: their metadata names their lesson
    (folder / "14_course_adapting_at_test_time.ipynb").write_text(
        (released / "17_course_when_it_breaks.ipynb").read_text())
    (found,) = lab.handed_in(folder)
    hand_in = lab.look_at(found, folder, lessons)
    assert hand_in.lesson is not None and hand_in.lesson.name == "17_course_when_it_breaks"
    assert hand_in.note == ("its file name says lesson 14, but the notebook is lesson 17 (17_course_when_it_breaks): "
                            "graded as lesson 17")
    (folder / "14.ipynb").write_text((notebooks_dir() / f"{LESSON}.ipynb").read_text())
    assert lab.look_at(folder / "14.ipynb", folder, lessons).note == ""


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
    assert re.search("^its check cell was edited .*the grader's own check says: right$", got[("merged.ipynb",
                                                                                              ENTROPY)][1])
    for file, why in (("exits.ipynb", "the kernel died"), ("loops.ipynb", "the time limit")):
        assert got[(file, BN)] == (True, "right")
        for exercise in (ENTROPY, LOGITS):
            passed, message = got[(file, exercise)]
            assert not passed and message.startswith(f"not graded: {why}") and f"in cell {after_bn}" in message, message
