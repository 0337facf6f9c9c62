"""Every name transformers, PEFT, TRL and diffusers (and diffusers' training examples) import
from ``accelerate`` imports through the compat distribution.

The names are read from the installed libraries' sources, so a release that needs a new name
fails here, not for a user.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import accelerate  # noqa: E402, F401  (the workspace always has the compat distribution: never a skip)
import ecosystem_imports as scan  # noqa: E402


@pytest.mark.parametrize("library", scan.LIBRARIES)
def test_every_accelerate_import_resolves(library):
    root = scan.library_root(library)
    if root is None:
        pytest.skip(f"{library} is not installed")
    imports = scan.accelerate_imports(root)
    assert len(imports) >= 10, f"found only {len(imports)} accelerate imports in {root}"
    assert scan.missing(imports) == {}


def test_diffusers_examples_imports_resolve():
    imports = scan.read_list(Path(__file__).with_name("diffusers_examples_imports.txt"))
    assert len(imports) > 20
    assert scan.missing(imports) == {}


def test_the_scan_catches_a_missing_name(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "m.py").write_text(
        "from accelerate.utils import set_seed, no_such_accelerate_name\nimport accelerate.nowhere\n"
    )
    failures = scan.missing(scan.accelerate_imports(tmp_path / "lib"))
    assert set(failures) == {"accelerate.utils:no_such_accelerate_name", "accelerate.nowhere"}
