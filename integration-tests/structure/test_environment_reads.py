"""Every ``ACCEL_*`` / ``ACCELERATE_*`` variable (and Accelerate's ``PARALLELISM_CONFIG_*``) is
read through its declaration: ``Option.from_env`` in ``accel/config/options.py`` is the only
code that looks such a name up in ``os.environ`` or in an environment mapping."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READER = ROOT / "packages/accel-core/src/accel/config/options.py"
PREFIXES = ("ACCEL_", "ACCELERATE_", "PARALLELISM_CONFIG_")


def _sources() -> list[Path]:
    return sorted(p for p in ROOT.glob("packages/*/src/**/*.py") if p != READER)


def _constants(trees: dict[Path, ast.Module]) -> dict[str, set[str]]:
    """Module-level ``NAME = "text"`` of every source, by name."""
    found: dict[str, set[str]] = {}
    for tree in trees.values():
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                if isinstance(node.value.value, str):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            found.setdefault(target.id, set()).add(node.value.value)
    return found


def _values(node: ast.AST, constants: dict[str, set[str]]) -> set[str]:
    """What a key expression may be: texts, and ``prefix*`` for a prefix + something."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Name):
        return constants.get(node.id, set())
    if isinstance(node, ast.Attribute) and node.attr.isupper():
        return constants.get(node.attr, set())
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return {value + "*" for value in _values(node.left, constants)}
    if isinstance(node, ast.JoinedStr) and node.values:
        return {value + "*" for value in _values(node.values[0], constants)}
    return set()


def _variable(value: str) -> bool:
    return value.rstrip("*").startswith(PREFIXES)


def _reads(tree: ast.Module) -> list[tuple[int, ast.AST]]:
    """``(line, key)`` of every look-up: ``x.get(key)``, ``getenv(key)``, ``x[key]``, ``key in x``."""
    found: list[tuple[int, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("get", "getenv"):
                found.append((node.lineno, node.args[0]))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            found.append((node.lineno, node.slice))
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            found.append((node.lineno, node.left))
    return found


def hand_reads(sources: list[Path]) -> list[str]:
    """``path:line: NAME`` for each variable read other than through its declaration."""
    trees = {path: ast.parse(path.read_text(), str(path)) for path in sources}
    constants = _constants(trees)
    problems = []
    for path, tree in trees.items():
        for line, key in _reads(tree):
            names = sorted(v for v in _values(key, constants) if _variable(v))
            if names:
                where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
                problems.append(f"{where}:{line}: {', '.join(names)}")
    return problems


def test_no_variable_is_read_by_hand():
    problems = hand_reads(_sources())
    assert not problems, (
        "read these variables through their Option (declare one with env=..., then "
        "option.from_env()):\n" + "\n".join(problems)
    )


def test_the_scan_sees_each_way_of_reading_by_hand(tmp_path):
    source = tmp_path / "reader.py"
    source.write_text(
        "import os\n"
        'FLAG = "ACCEL_SOMETHING"\n'
        'PREFIX = "PARALLELISM_CONFIG_"\n'
        "a = os.environ.get(FLAG)\n"
        'b = os.getenv("ACCELERATE_OTHER")\n'
        "c = os.environ[PREFIX + 'TP_SIZE']\n"
        "d = environment.FLAG in env\n"
        'e = env.get(f"ACCEL_{name}")\n'
        'os.environ["ACCEL_WRITTEN"] = "1"\n'
        'f = os.environ.get("HOME")\n'
    )
    found = [line.split(":")[1] for line in hand_reads([source])]
    assert found == ["4", "5", "6", "7", "8"]
