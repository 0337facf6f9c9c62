"""The README's porting claim says what test_accelerate_namespace.py checks, and no more."""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).parent
REPO = next(p for p in HERE.parents if (p / "README.md").is_file() and (p / "packages").is_dir())
TESTS = REPO / "packages" / "accel-core" / "tests"
# wherever the tests folder keeps them: the README must name their real place
NAMES = next(TESTS.rglob("accelerate_public_names.txt"))
CHECK = next(TESTS.rglob("test_accelerate_namespace.py"))


def _porting_paragraph() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Porting a script from Accelerate\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, "README.md has no 'Porting a script from Accelerate' section"
    return " ".join(match.group(1).split())


def test_readme_names_the_check_and_the_exceptions():
    paragraph = _porting_paragraph()
    for reference in (
        str(NAMES.relative_to(REPO)),
        str(CHECK.relative_to(REPO)),
        "docs/porting.md",
        "Accelerate names accel does not provide",
    ):
        assert reference in paragraph, reference
    assert "except" in paragraph
    section = (REPO / "docs" / "porting.md").read_text(encoding="utf-8")
    assert "## Accelerate names accel does not provide" in section


def test_readme_lists_exactly_the_modules_of_the_committed_list():
    modules = {
        line.split()[0]
        for line in NAMES.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    named = set(re.findall(r"`(accelerate(?:\.\w+)*)`", _porting_paragraph()))
    assert named == modules, sorted(named ^ modules)
