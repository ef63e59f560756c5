"""The README's method recipe, word for word: its template copied where it says, checked by the
command it gives, on a scratch copy of the package; and the template dropped into
``stamplib/methods/`` as it is (what the README once suggested) is one line saying what to add."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.methods.test_method_recipe import recipe_file
from tests.recipes.support import REPO, run_cli, scratch_package

README = REPO / "README.md"


def method_bullet() -> str:
    """The README's "A method" item of "Extending it", up to the next item."""
    found = re.search(r"^- \*\*A method\*\*: (.*?)(?=^- \*\*|\Z)", README.read_text(), re.S | re.M)
    assert found, "README.md has no '- **A method**:' item"
    return " ".join(found.group(1).split())


def template_steps() -> tuple[Path, str, list[str]]:
    """What the README says to do with the template: the file, where to copy it, the command."""
    bullet = method_bullet()
    copy_step = re.search(r"start from `(templates/[\w/]+\.py)`: copy it to `([\w/]+\.py)`", bullet)
    command = re.search(r"`PYTHONPATH=\. python -m stamplib (check-method [\w.:]+)`", bullet)
    assert copy_step and command, f"the README's method item no longer reads as the test expects: {bullet}"
    return REPO / copy_step.group(1), copy_step.group(2), command.group(1).split()


def test_the_readme_names_the_in_package_recipe_and_its_test() -> None:
    bullet = method_bullet()
    assert "one file in `stamplib/methods/` whose class carries `@register(\"NAME\")`" in bullet, bullet
    assert "[recipe](docs/architecture.md#adding-a-method)" in bullet and "check-method NAME" in bullet
    _where, text = recipe_file()  # the recipe's file is what the README says: it carries @register
    assert re.search(r"^@register\(\"\w+\"\)\nclass ", text, re.M), text
    assert "tests/methods/test_method_recipe.py" in (REPO / "docs" / "architecture.md").read_text()


def test_the_template_copied_where_the_readme_says_passes_the_command_it_gives(tmp_path: Path) -> None:
    template, destination, argv = template_steps()
    copy = scratch_package(tmp_path)
    work = tmp_path / "work"
    (work / destination).parent.mkdir(parents=True)
    shutil.copy(template, work / destination)
    assert argv[1].split(":")[0] == destination.removesuffix(".py").replace("/", "."), (destination, argv)

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([".", str(copy.parent)]), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "stamplib", *argv], capture_output=True, text=True, env=env,
                          cwd=work, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "passed" in done.stdout and "failed" not in done.stdout, done.stdout[-3000:]


def test_the_template_dropped_into_the_package_is_one_line_naming_register(tmp_path: Path) -> None:
    template, _destination, _argv = template_steps()
    copy = scratch_package(tmp_path)
    shutil.copy(template, copy / "methods" / "my_method.py")
    done = run_cli(copy, "check-method", "my_method")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "stamplib/methods/my_method.py defines ConfidentTent" in lines[0]
    assert "@register('my_method')" in lines[0], lines[0]
