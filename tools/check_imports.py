"""Check the import structure of every package under packages/ (run in CI).

Fails (exit 1, one line per problem) when:

1. a package's modules import each other in a circle (every import counts: inside
   functions, and under ``if TYPE_CHECKING:`` too, since a type hint is a dependency; the
   one exception is ``TYPE_CONTRACTS``, whose type-only imports name the classes of every
   layer that a contract's signatures use);
2. a module of accel-core imports a module of a *higher* layer, for type hints too (the
   order is ``LAYERS`` below: environment and declarations -> types -> plugins -> state -> collectives -> data ->
   models/weights/prepared -> checkpoint (layout and orchestration) -> big-model ->
   precision/backends -> tracking -> Accelerator -> launchers -> compatibility re-exports);
   imports inside functions count as well (every ``import`` node of the module is read);
3. a plugin package imports a private name of another accel distribution
   (``from accel.x import _y``, ``accel.x._y``), touches core's private state
   (``._shared_state``, ``._models``, ``._optimizers``, ``._schedulers``, ``._dataloaders``,
   ``._custom_objects``), or imports a sibling accel package that its pyproject does not
   declare as a dependency;
4. ``accel/utils/`` holds more than 10% of accel-core's lines, or anything but re-exports.

Usage: ``python tools/check_imports.py`` (from anywhere; stdlib only).
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "packages"

TYPE_CONTRACTS = {"accel.hookspecs"}
"""Modules whose ``if TYPE_CHECKING:`` imports are not dependencies: the hook specifications
name the classes that hooks pass and return (Backend, Accelerator, RunView, ...), from every
layer, for type checkers only; at run time they import nothing of accel."""

LAYERS: list[tuple[str, ...]] = [
    # the tables, the variables' names, and the declarations of settings and variables
    # (read by every layer above, the plugin manager included)
    (
        "accel.catalog",
        "accel.errors",
        "accel.env_vars",
        "accel.sizes",
        "accel.config.options",
        "accel.config.core_options",
        "accel.config.launched",
        "accel.entry_points",
    ),
    ("accel.types", "accel.kwargs", "accel.hookspecs", "accel.devices", "accel.contexts"),
    ("accel.plugins", "accel.lazy"),
    ("accel.config", "accel.parallelism_config", "accel.device_mesh", "accel.parallelism_setup"),
    ("accel.faults",),
    ("accel.state",),
    ("accel.logging", "accel.distributed", "accel.rng", "accel.memory", "accel.progress"),
    ("accel.precision.base",),
    # elastic resume: the position format and the loaders' mixin sit with the data loaders,
    # the resume plan with the checkpoint orchestration
    (
        "accel.data",
        "accel.elastic.position",
        "accel.elastic.loader",
        "accel.optimizer",
        "accel.scheduler",
    ),
    (
        "accel.unwrap",
        "accel.compilation",
        "accel.prepared",
        "accel.checkpoint.weights",
        "accel.checkpoint.files",
        "accel.checkpoint.torch_files",
    ),
    # the checkpoint folder layout and its orchestration (manager, async writer, resume plan):
    # below backends and big-model code, which it reaches only through what it is given
    ("accel.checkpoint", "accel.elastic"),
    ("accel.big_model.modeling", "accel.big_model.offload"),
    ("accel.big_model.device_map", "accel.big_model.module_hooks"),
    ("accel.precision", "accel.backends", "accel.quantization", "accel.big_model.hooks"),
    ("accel.big_model", "accel.inference"),
    ("accel.tracking", "accel.microbatch", "accel.throughput"),
    ("accel.connector",),
    ("accel.accelerator", "accel.accelerator_checkpointing", "accel.accelerator_process"),
    ("accel.launchers",),
    ("accel.default_plugins", "accel.testing", "accel"),
    (
        "accel.utils",
        "accel.test_utils",
        "accel.hooks",
        "accel.big_modeling",
        "accel.data_loader",
        "accel.stateful_loader",
        "accel.local_sgd",
    ),
]
"""accel-core's layers, bottom first. A module belongs to the longest prefix listed."""

ALIAS_LAYER = len(LAYERS) - 1
"""The last layer: Accelerate's module paths, kept for users as aliases or re-exports.
Package sources import the concept modules instead (tests may import an alias to test it)."""


PRIVATE_STATE = ("_shared_state", "_models", "_optimizers", "_schedulers", "_dataloaders")
PRIVATE_STATE += ("_custom_objects",)


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    package_dir: Path
    distribution: str


def _distributions() -> dict[str, tuple[Path, set[str]]]:
    """``{distribution: (src dir, declared accel dependencies)}`` for every package."""
    found = {}
    for pyproject in sorted(PACKAGES.glob("*/pyproject.toml")):
        data = tomllib.loads(pyproject.read_text())
        name = data["project"]["name"]
        deps = set()
        for spec in data["project"].get("dependencies", []):
            match = re.match(r"(accel-[a-z0-9-]+)", spec)
            if match:
                deps.add(match.group(1))
        found[name] = (pyproject.parent / "src", deps)
    return found


def _modules(src: Path, distribution: str) -> list[Module]:
    result = []
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        result.append(Module(".".join(parts), path, src, distribution))
    return result


def _type_only(tree: ast.Module) -> set[int]:
    """Ids of the nodes under the module's top-level ``if TYPE_CHECKING:`` blocks."""
    return {
        id(sub)
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        for stmt in node.body
        for sub in ast.walk(stmt)
    }


def _imports(module: Module, known: set[str]) -> list[tuple[str, int, list[str]]]:
    """``(imported module, line, names)`` for each import (``TYPE_CHECKING`` blocks included,
    except in ``TYPE_CONTRACTS``)."""
    tree = ast.parse(module.path.read_text(), str(module.path))
    is_package = module.path.name == "__init__.py"
    base = module.name.split(".") if is_package else module.name.split(".")[:-1]
    skipped = _type_only(tree) if module.name in TYPE_CONTRACTS else set()
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((alias.name, node.lineno, []))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [alias.name for alias in node.names]
            submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in known]
            if submodules:
                found.extend((sub, node.lineno, []) for sub in submodules)
                rest = [n for n in names if f"{target}.{n}" not in known]
                if rest:
                    found.append((target, node.lineno, rest))
            else:
                found.append((target, node.lineno, names))
    return found


def _layer(name: str) -> int | None:
    best, best_len = None, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    sys.setrecursionlimit(10000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return result


def _package_of(name: str) -> str:
    """The parent package a module import implies (``accel.x.y`` imports ``accel.x`` too)."""
    return name.rsplit(".", 1)[0] if "." in name else name


def _utils_problems(core_src: Path) -> list[str]:
    problems = []
    total = sum(len(p.read_text().splitlines()) for p in core_src.rglob("*.py"))
    utils = sum(len(p.read_text().splitlines()) for p in (core_src / "accel/utils").rglob("*.py"))
    share = utils / total
    if share > 0.10:
        problems.append(f"accel/utils holds {utils} of {total} lines ({share:.0%} > 10%)")
    allowed_functions = {"__getattr__", "__dir__", "_add"}
    for path in (core_src / "accel/utils").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name not in allowed_functions:
                problems.append(
                    f"{path.relative_to(ROOT)}: defines {node.name}(): utils/ only re-exports"
                )
            if isinstance(node, ast.ClassDef):
                problems.append(
                    f"{path.relative_to(ROOT)}: defines class {node.name}: utils/ only re-exports"
                )
    return problems


def main() -> int:
    """Run every check; print the problems; 0 when there are none."""
    distributions = _distributions()
    modules: list[Module] = []
    for dist, (src, _) in distributions.items():
        modules.extend(_modules(src, dist))
    known = {m.name for m in modules}
    top_of = {}
    for dist, (src, _) in distributions.items():
        for child in src.iterdir():
            if child.is_dir() or child.suffix == ".py":
                top_of[child.stem] = dist
    problems: list[str] = []
    graph: dict[str, set[str]] = {m.name: set() for m in modules}
    for module in modules:
        rel = module.path.relative_to(ROOT)
        for target, line, names in _imports(module, known):
            top = target.split(".")[0]
            if target in known and target != module.name:
                graph[module.name].add(target)
            target_dist = top_of.get(top)
            if target_dist is None:
                continue
            if (
                target_dist == "accel-core"
                and _layer(target) == ALIAS_LAYER
                and _layer(module.name) != ALIAS_LAYER
            ):
                problems.append(
                    f"{rel}:{line}: imports {target}, an Accelerate alias path kept for users; "
                    "import the module that defines the name"
                )
            if module.distribution == "accel-core":
                mine, theirs = _layer(module.name), _layer(target)
                if target_dist == "accel-core" and mine is not None and theirs is not None:
                    if theirs > mine:
                        problems.append(
                            f"{rel}:{line}: {module.name} (layer {mine}) imports {target} (layer {theirs}), a higher layer"
                        )
                continue
            if target_dist != module.distribution:
                private = [n for n in names if n.startswith("_") and n != "__version__"]
                private += [part for part in target.split(".") if part.startswith("_")]
                if private:
                    problems.append(
                        f"{rel}:{line}: imports private {', '.join(private)} from {target}"
                    )
                declared = distributions[module.distribution][1]
                if target_dist != "accel-core" and target_dist not in declared:
                    problems.append(
                        f"{rel}:{line}: imports {target} from {target_dist}, which {module.distribution} does not depend on"
                    )
        if module.distribution != "accel-core":
            text = module.path.read_text()
            for number, source_line in enumerate(text.splitlines(), 1):
                for attr in PRIVATE_STATE:
                    if re.search(rf"\.{attr}\b", source_line):
                        problems.append(f"{rel}:{number}: touches core's private {attr}")
    for component in _cycles(graph):
        problems.append("import circle: " + " -> ".join(component))
    problems.extend(_utils_problems(distributions["accel-core"][0]))
    for problem in problems:
        print(problem)
    print(
        f"check_imports: {len(modules)} modules in {len(distributions)} packages, "
        f"{len(problems)} problem(s)",
        file=sys.stderr,
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
