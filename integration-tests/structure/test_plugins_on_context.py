"""Plugins see the run through their context: no plugin source uses the Accelerator class or
the process-wide state singletons (``AcceleratorState``, ``PartialState``, ``GradientState``),
except the documented public helpers that user code calls without a context."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"Accelerator", "AcceleratorState", "PartialState", "GradientState"}
ALLOWED = {
    # build_gpt_model(plugin=None): a public helper called before any context reaches user code;
    # without plugin= it finds the Accelerator's plugin in the state (docs/design.md)
    ("accel-megatron", "accel_megatron/models.py", "AcceleratorState"),
}
SKIPPED = {
    "accel-core",  # the owner of the state and of the Accelerator
    "accel-cli",  # a front end: `accel test` runs a user script that creates an Accelerator
    "accelerate-compat",  # Accelerate's import names, re-exported for users
}


def _uses(path: Path) -> set[str]:
    """The forbidden names ``path`` imports from accel or reads as ``accel.<module>.<name>``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "accel":
            found |= {alias.name for alias in node.names} & FORBIDDEN
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN:
            if ast.unparse(node.value).split(".")[0] == "accel":
                found.add(node.attr)
    return found


def test_no_plugin_uses_the_accelerator_or_the_state_singleton():
    problems = []
    for package in sorted((ROOT / "packages").iterdir()):
        if package.name in SKIPPED or not (package / "src").is_dir():
            continue
        for path in sorted((package / "src").rglob("*.py")):
            if ".venv" in path.parts:
                continue
            rel = path.relative_to(package / "src").as_posix()
            for name in sorted(_uses(path)):
                if (package.name, rel, name) not in ALLOWED:
                    problems.append(f"{package.name}/src/{rel}: uses {name}")
    assert not problems, "read the context (backend.context, precision.context) instead:\n" + (
        "\n".join(problems)
    )


def test_the_check_sees_a_singleton_read(tmp_path):
    source = tmp_path / "x.py"
    source.write_text(
        "def f():\n    from accel.state import AcceleratorState\n\n"
        "    return AcceleratorState.current()\n\n"
        "def g():\n    import accel.state\n\n    return accel.state.PartialState()\n"
    )
    assert _uses(source) == {"AcceleratorState", "PartialState"}
