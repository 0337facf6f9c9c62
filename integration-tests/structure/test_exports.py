"""One export mechanism: every lazily exported name is declared once, in a table given to
:func:`accel.lazy.exports`, and type checkers see the same names through ``TYPE_CHECKING``
imports; a plugin's names under ``accel`` come from :data:`accel.catalog.EXPORTS`."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import accel
import accel.utils
import accelerate
import pytest
from accel import catalog

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(ROOT.glob("packages/*/src"))


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, tuple[Path, ast.Module]]:
    found = {}
    for src in SOURCES:
        for path in sorted(src.rglob("*.py")):
            found[_module_name(path, src)] = (path, ast.parse(path.read_text(encoding="utf-8")))
    return found


MODULES = _modules()


def _exports_call(tree: ast.Module) -> ast.Call | None:
    """The module's ``__getattr__, __dir__ = exports(...)``, if any."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == "exports"
        ):
            return node.value
    return None


LAZY_MODULES = sorted(name for name, (_, tree) in MODULES.items() if _exports_call(tree))


def test_no_module_writes_its_own_module_getattr():
    offenders = []
    for name, (path, tree) in MODULES.items():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__dir__"):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: def {node.name}")
            targets = node.targets if isinstance(node, ast.Assign) else []
            assigned = {
                getattr(element, "id", None)
                for target in targets
                for element in (target.elts if isinstance(target, ast.Tuple) else [target])
            }
            if assigned & {"__getattr__", "__dir__"} and not (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", None) == "exports"
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}.__getattr__")
    assert not offenders, "use accel.lazy.exports:\n" + "\n".join(offenders)
    assert {"accel", "accel.utils", "accel_fsdp", "accelerate"} <= set(LAZY_MODULES)


def _defined(module: str) -> set[str]:
    """The names a module binds at top level (read from its source: importing it may import torch)."""
    names = set()
    statements = list(MODULES[module][1].body)
    for node in statements:
        if isinstance(node, (ast.If, ast.Try)):  # ``if TYPE_CHECKING: ... else: ...``
            statements.extend([*node.body, *node.orelse])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(alias.asname or alias.name for alias in node.names)
        else:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                elements = target.elts if isinstance(target, ast.Tuple) else [target]
                names.update(e.id for e in elements if isinstance(e, ast.Name))
    return names


def _type_checking_reexports(tree: ast.Module) -> dict[str, str]:
    """``{name: module}`` of the ``from module import name as name`` under ``if TYPE_CHECKING:``."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    for alias in statement.names:
                        if alias.asname == alias.name:
                            found[alias.name] = statement.module
    return found


@pytest.mark.parametrize("name", LAZY_MODULES)
def test_type_checkers_see_the_lazy_table(name):
    """The ``TYPE_CHECKING`` re-exports (what editors and ty follow) are the table, name for
    name and module for module; a name served by another distribution (``accel.tracking``'s
    tracker classes, from accel-trackers) is the exception: core may not import a plugin."""
    path, tree = MODULES[name]
    table_argument = _exports_call(tree).args[1]  # ty: ignore[possibly-missing-attribute]
    module = importlib.import_module(name)
    table = eval(ast.unparse(table_argument), vars(module))  # a name or a literal
    distribution_top = name.partition(".")[0]
    own = {
        key: value for key, value in table.items() if value.partition(".")[0] == distribution_top
    }
    assert _type_checking_reexports(tree) == own, path.relative_to(ROOT)
    assert set(table) <= set(dir(module))
    for key, target in own.items():  # every row names the module that defines the name
        assert key in _defined(target), f"{name}.{key}: not defined in {target}"


def test_first_party_accel_exports_hooks_return_their_catalog_rows():
    """A plugin's names under ``accel`` are listed once, in the catalog: each first-party
    ``accel_exports`` hook returns ``catalog_exports(...)``, and each row is served by the
    plugin package's own table."""
    distributions = {row.package for row in catalog.EXPORTS.values()}
    seen = set()
    for name, (path, tree) in MODULES.items():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == "accel_exports":
                body = [n for n in node.body if not isinstance(n, ast.Expr)]
                if not body:  # the hook specification
                    continue
                call = body[0].value if isinstance(body[0], ast.Return) else None
                assert isinstance(call, ast.Call) and ast.unparse(call.func) == "catalog_exports", (
                    path.relative_to(ROOT)
                )
                distribution, package = (arg.value for arg in call.args)  # ty: ignore[unresolved-attribute]
                assert package == name.partition(".")[0]
                table = vars(importlib.import_module(package))["_NAMES"]
                assert set(catalog.exports_of(distribution)) <= set(table), distribution
                seen.add(distribution)
    assert seen == distributions


def test_accelerate_names_are_accels():
    """The ``accelerate`` distribution adds no table of its own beyond ``Accelerator``."""
    assert set(dir(accel)) <= set(dir(accelerate))
    for name in ("ProjectConfiguration", "DeepSpeedPlugin", "ProfileKwargs"):
        assert getattr(accelerate, name) is getattr(accel, name)
