"""Count ``Any`` in annotations per thousand lines of ``packages/*/src``.

An occurrence is a name ``Any`` (or attribute ``typing.Any``) inside a parameter, return or
variable annotation, counted by walking each file's AST; string annotations are parsed too.
A module-level type alias whose value holds ``Any`` (``JSONValue: TypeAlias = Any``,
``Config = dict[str, JSONValue]``) is ``Any`` under another name: each use counts too.
Lines are all physical lines of the ``.py`` files. Usage::

    uv run python tools/any_density.py            # the total
    uv run python tools/any_density.py --files 10 # and the ten files with the most
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


ANY_NAMES = {"Any"}


def _any_in(node: ast.AST | None) -> int:
    """Number of ``Any`` names (or aliases of it) in one annotation expression."""
    if node is None:
        return 0
    count = 0
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in ANY_NAMES:
            count += 1
        elif isinstance(sub, ast.Attribute) and sub.attr == "Any":
            count += 1
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                count += _any_in(ast.parse(sub.value, mode="eval"))
            except SyntaxError:
                pass
    return count


def _aliases(tree: ast.Module) -> dict[str, ast.expr]:
    """The module-level ``Name = value`` / ``Name: TypeAlias = value`` assignments of a module."""
    found: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            found[target.id] = value
    return found


def find_any_aliases(paths: list[Path]) -> None:
    """Add to ``ANY_NAMES`` every module-level alias whose value holds ``Any`` or such an alias."""
    assignments: dict[str, ast.expr] = {}
    for path in paths:
        assignments.update(_aliases(ast.parse(path.read_text(encoding="utf-8"))))
    grew = True
    while grew:
        grew = False
        for name, value in assignments.items():
            if name not in ANY_NAMES and _any_in(value):
                ANY_NAMES.add(name)
                grew = True


def count_file(path: Path) -> tuple[int, int]:
    """``(Any count, line count)`` for one source file."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            count += sum(_any_in(a.annotation) for a in every if a is not None)
            count += _any_in(node.returns)
        elif isinstance(node, ast.AnnAssign):
            count += _any_in(node.annotation)
    return count, len(source.splitlines())


def main() -> None:
    """Print the density over every package's ``src``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=0, help="also list the N densest files")
    options = parser.parse_args()
    paths = sorted(ROOT.glob("packages/*/src/**/*.py"))
    find_any_aliases(paths)
    per_file = {path: count_file(path) for path in paths}
    anys = sum(c for c, _ in per_file.values())
    lines = sum(n for _, n in per_file.values())
    print(f"{anys} Any in {lines} lines: {1000 * anys / lines:.1f} per thousand lines")
    if len(ANY_NAMES) > 1:
        print("counted as Any too (aliases of it):", ", ".join(sorted(ANY_NAMES - {"Any"})))
    ranked = sorted(per_file.items(), key=lambda item: -item[1][0])[: options.files]
    for path, (c, n) in ranked:
        print(f"{c:5d} {n:6d}  {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
