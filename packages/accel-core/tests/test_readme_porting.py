"""The README's porting claim says what test_accelerate_namespace.py checks, and no more."""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).parent
REPO = HERE.parents[2]


def _porting_paragraph() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"^## Porting a script from Accelerate\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, "README.md has no 'Porting a script from Accelerate' section"
    return " ".join(match.group(1).split())


def test_readme_names_the_check_and_the_exceptions():
    paragraph = _porting_paragraph()
    for reference in (
        "packages/accel-core/tests/accelerate_public_names.txt",
        "packages/accel-core/tests/test_accelerate_namespace.py",
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
        for line in (HERE / "accelerate_public_names.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    named = set(re.findall(r"`(accelerate(?:\.\w+)*)`", _porting_paragraph()))
    assert named == modules, sorted(named ^ modules)
