"""docs/architecture.md's claim recipe, one `Claim` in the ledger, applied to a copy of the
package: `claims judge` judges the new claim on the committed reference records, and nothing
else was edited."""

from __future__ import annotations

from pathlib import Path

from stamplib.evidence import ledger, pages
from tests.recipes.support import REPO, apply, changed_files, run_cli, scratch_package, snippets

ANCHORS = {"the claim": "LEDGER: tuple[Claim, ...] = (\n"}


def test_a_new_claim_is_one_entry_and_is_judged_from_the_command_line(tmp_path: Path) -> None:
    copy = scratch_package(tmp_path)
    assert apply("claim", copy, ANCHORS) == ["evidence/ledger.py"]
    assert changed_files(copy) == ["evidence/ledger.py"]
    done = run_cli(copy, "claims", "judge", "--results", str(REPO / "results" / "reference"))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert len(lines) == len(ledger.LEDGER) + 1  # every claim of today's ledger, and the new one first
    key = lines[0].split(":")[0]
    assert key == "tent_over_source_acc" and key not in ledger.BY_KEY
    answer = lines[0].split(": ", 1)[1].split(" — ")[0]
    assert answer.split(" (")[0] in {"yes", "no", "tie", "undecided", "smaller than the paper's"}, lines[0]
    assert "ACC Tent" in lines[0]  # its numbers, from the records of both arms


def test_the_recipe_names_the_ledger_and_its_margin_classes() -> None:
    ((file, code),) = snippets("claim").values()
    assert file == "stamplib/evidence/ledger.py" and "Claim(" in code
    for name in ("Claim", "Difference", "Arm", "_T1"):
        assert hasattr(ledger, name), f"the recipe uses ledger.{name}"
    assert pages.COMMAND in (REPO / "docs" / "architecture.md").read_text()
