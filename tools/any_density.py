"""Count ``Any`` in annotations per thousand lines of ``packages/*/src``.

An occurrence is a name ``Any`` (or attribute ``typing.Any``) inside a parameter, return or
variable annotation, counted by walking each file's AST; string annotations are parsed too.
Lines are all physical lines of the ``.py`` files. Usage::

    uv run python tools/any_density.py            # the total
    uv run python tools/any_density.py --files 10 # and the ten files with the most
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _any_in(node: ast.AST | None) -> int:
    """Number of ``Any`` names in one annotation expression."""
    if node is None:
        return 0
    count = 0
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "Any":
            count += 1
        elif isinstance(sub, ast.Attribute) and sub.attr == "Any":
            count += 1
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                count += _any_in(ast.parse(sub.value, mode="eval"))
            except SyntaxError:
                pass
    return count


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
    per_file = {path: count_file(path) for path in sorted(ROOT.glob("packages/*/src/**/*.py"))}
    anys = sum(c for c, _ in per_file.values())
    lines = sum(n for _, n in per_file.values())
    print(f"{anys} Any in {lines} lines: {1000 * anys / lines:.1f} per thousand lines")
    ranked = sorted(per_file.items(), key=lambda item: -item[1][0])[: options.files]
    for path, (c, n) in ranked:
        print(f"{c:5d} {n:6d}  {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
