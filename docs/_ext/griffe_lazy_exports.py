"""Griffe extension: make the names that accel's packages export lazily visible to mkdocstrings.

``accel``, ``accel.utils`` and several plugin packages export their public names through a
module ``__getattr__`` that reads a ``_NAMES`` table (``name -> module``), so static analysis
sees no such member. This extension reads the same table (statically, from the source) and
adds one alias per name, so the API reference can say ``::: accel.Accelerator`` -- the
public import path -- wherever the class is defined today.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import griffe


def _string(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def lazy_names(source: str) -> dict[str, str]:
    """The ``name -> module`` table of a module: its ``_NAMES = {...}`` literal and ``_add(...)`` calls."""
    table: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        value = None
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_NAMES" for t in node.targets
        ):
            value = node.value
        elif isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "_NAMES":
            value = node.value
        if isinstance(value, ast.Dict):
            for key, module in zip(value.keys, value.values):
                if key is not None and _string(key) and _string(module):
                    table[_string(key)] = _string(module)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "_add"
            and node.args
            and _string(node.args[0])
        ):
            for arg in node.args[1:]:
                if _string(arg):
                    table[_string(arg)] = _string(node.args[0])
    return table


class LazyExports(griffe.Extension):
    """Add an alias for every lazily exported name of every module that has a ``_NAMES`` table."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Walk the loaded package and add the aliases."""
        self._visit(pkg)

    def _visit(self, module: griffe.Module) -> None:
        filepath = module.filepath
        if isinstance(filepath, Path) and filepath.suffix == ".py" and filepath.exists():
            table = lazy_names(filepath.read_text(encoding="utf-8"))
            if table:  # the lazy names are the module's public names (its __all__ is computed)
                exports = module.exports if isinstance(module.exports, list) else []
                module.exports = sorted({*(str(e) for e in exports), *table})
            for name, target in table.items():
                if name in module.members and not module.members[name].is_alias:
                    continue
                if "." not in target:  # relative: "config" inside accel_megatron
                    target = f"{module.path}.{target}"
                module.set_member(name, griffe.Alias(name, f"{target}.{name}", parent=module))
        for member in list(module.members.values()):
            if not member.is_alias and member.is_module:
                self._visit(member)
