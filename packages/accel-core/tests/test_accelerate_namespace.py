"""Issue 19: every public name of Accelerate 1.15 exists under accel's same path, or docs say why not."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

HERE = Path(__file__).parent
NAMES = HERE / "accelerate_public_names.txt"
PORTING = HERE.parents[2] / "docs" / "porting.md"


def _accelerate_names() -> list[tuple[str, str]]:
    rows = []
    for line in NAMES.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            module, name = line.split()
            rows.append((module.replace("accelerate", "accel", 1), name))
    return rows


def _omitted() -> set[str]:
    text = PORTING.read_text()
    match = re.search(
        r"^## [^\n]*names accel does not provide\n(.*?)(?=^## |\Z)", text, re.S | re.M | re.I
    )
    assert match, "docs/porting.md has no 'Names accel does not provide' section"
    names = set()
    for line in match.group(1).splitlines():  # the indented lines under each reason list the names
        if line.startswith("  `"):
            names |= set(re.findall(r"`(accel[\w.]*\.\w+)`", line))
    return names


OMITTED = _omitted()


def test_the_committed_list_is_accelerates():
    rows = _accelerate_names()
    assert len(rows) > 350
    assert ("accel.utils", "gather") in rows and ("accel", "Accelerator") in rows


@pytest.mark.parametrize(("module", "name"), _accelerate_names(), ids=lambda v: v)
def test_name_is_provided_or_documented_as_omitted(module, name):
    qualified = f"{module}.{name}"
    if qualified in OMITTED:
        return
    try:
        value = getattr(importlib.import_module(module), name)
    except ImportError as exc:  # a plugin-owned name: the error names the package to install
        assert "pip install" in str(exc), exc
        return
    except AttributeError:
        pytest.fail(f"{qualified} is neither provided nor listed in docs/porting.md")
    if callable(value) and not isinstance(value, type):
        assert value.__doc__, f"{qualified} has no docstring"


def test_omitted_names_are_really_absent():
    """A name listed as omitted that accel does provide must leave the list."""
    provided = []
    for qualified in sorted(OMITTED):
        module, _, name = qualified.rpartition(".")
        try:
            getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        provided.append(qualified)
    assert not provided, f"provided but listed as omitted in docs/porting.md: {provided}"
