"""Every name transformers, PEFT, TRL and diffusers import from ``accelerate``, read from their sources.

Shared by the tests and runnable as a script (``python ecosystem_imports.py``) to list what
the compat distribution is missing.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

LIBRARIES = ("transformers", "peft", "trl", "diffusers")


def library_root(name: str) -> Path | None:
    """The installed package folder of ``name``, or None when it is not installed."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def accelerate_imports(root: Path) -> dict[tuple[str, str | None], list[str]]:
    """``{(module, name or None): [file:line, ...]}`` for every accelerate import under ``root``."""
    found: dict[tuple[str, str | None], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if "accelerate" not in text:  # most files: no parse needed
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        where = f"{path.relative_to(root.parent)}"
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module == "accelerate" or node.module.startswith("accelerate."):
                    for alias in node.names:
                        key = (node.module, alias.name)
                        found.setdefault(key, []).append(f"{where}:{node.lineno}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "accelerate" or alias.name.startswith("accelerate."):
                        found.setdefault((alias.name, None), []).append(f"{where}:{node.lineno}")
    return found


def missing(imports: dict[tuple[str, str | None], list[str]]) -> dict[str, list[str]]:
    """``{"module:name": [where, ...]}`` for every import that fails through ``accelerate``."""
    failures: dict[str, list[str]] = {}
    for (module, name), where in sorted(imports.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        label = f"{module}:{name}" if name else module
        try:
            imported = importlib.import_module(module)
            if name is not None and name != "*" and not hasattr(imported, name):
                importlib.import_module(f"{module}.{name}")
        except Exception as exc:  # noqa: BLE001 - every failure is reported with its cause
            failures[label] = [f"{type(exc).__name__}: {exc}", *where[:3]]
    return failures


def read_list(path: Path) -> dict[tuple[str, str | None], list[str]]:
    """A committed ``module:name`` list (see diffusers_examples_imports.txt) as :func:`accelerate_imports` returns."""
    found: dict[tuple[str, str | None], list[str]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            module, _, name = line.partition(":")
            found[(module, name or None)] = [f"{path.name}:{number}"]
    return found


def main(argv: list[str]) -> int:
    """Print what each library imports and what fails; ``--list DIR`` prints DIR's imports."""
    if argv[:1] == ["--list"]:
        for module, name in sorted(accelerate_imports(Path(argv[1])), key=str):
            print(f"{module}:{name}" if name else module)
        return 0
    total = 0
    for lib in LIBRARIES:
        root = library_root(lib)
        if root is None:
            print(f"{lib}: not installed")
            continue
        imports = accelerate_imports(root)
        failures = missing(imports)
        total += len(failures)
        print(f"{lib}: {len(imports)} imports, {len(failures)} missing")
        for label, info in failures.items():
            print(f"  {label}: {info[0]}  ({', '.join(info[1:])})")
    return 1 if total else 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
