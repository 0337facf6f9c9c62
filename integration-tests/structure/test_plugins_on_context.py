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


# -- attribute reads: a plugin reads only the context's public, named members ----------------

CONTEXT_SOURCE = ROOT / "packages/accel-core/src/accel/backends/context.py"


def _context_members() -> set[str]:
    """The public members of ``BackendContext``: its methods and properties, and what its
    ``__init__`` assigns to ``self``."""
    tree = ast.parse(CONTEXT_SOURCE.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "BackendContext")
    members = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    for node in ast.walk(init):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                members.add(node.attr)
    return {name for name in members if not name.startswith("_")}


def _is_context(node: ast.AST, aliases: set[str]) -> bool:
    """Whether ``node`` denotes a backend context: ``<x>.context`` (a backend's, a precision's),
    ``<x>._run`` (a plugin object attached to its run), or a name bound to one of those (or a
    parameter named ``context``)."""
    if isinstance(node, ast.Attribute):
        return node.attr in ("context", "_run")
    return isinstance(node, ast.Name) and node.id in aliases


def _sees_a_context(tree: ast.Module) -> bool:
    """Whether a module gets backend contexts: it builds on core's backends or precisions, or
    attaches a plugin object to its run (``def attach(self, run)``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            ("accel.backends", "accel.precision")
        ):
            return True
        if isinstance(node, ast.FunctionDef) and node.name == "attach":
            return True
    return False


def _context_reads(path: Path, members: set[str]) -> list[str]:
    """``line: expression`` for each read of a context attribute that is not a public member."""
    problems: dict[tuple[int, int], str] = {}
    tree = ast.parse(path.read_text(), str(path))
    if not _sees_a_context(tree):
        return []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = function.args
        aliases = {a.arg for a in args.args + args.kwonlyargs if a.arg == "context"}
        for node in ast.walk(function):  # names bound to a context: ``run = self.context``
            if isinstance(node, ast.Assign) and _is_context(node.value, aliases):
                aliases |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(function):
            read = None
            if isinstance(node, ast.Attribute) and _is_context(node.value, aliases):
                read = node.attr
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2
                and _is_context(node.args[0], aliases)
                and isinstance(node.args[1], ast.Constant)
            ):
                read = node.args[1].value
            if read is not None and read not in members:
                problems[node.lineno, node.col_offset] = f"{node.lineno}: {ast.unparse(node)}"
    return [problems[key] for key in sorted(problems)]


def test_plugins_read_only_the_public_members_of_their_context():
    members = _context_members()
    assert {"precision", "plugins", "device", "parallelism_config"} <= members
    assert "state" not in members, "the context hands out named facts, not the state singleton"
    problems = []
    for package in sorted((ROOT / "packages").iterdir()):
        if package.name in SKIPPED or not (package / "src").is_dir():
            continue
        for path in sorted((package / "src").rglob("*.py")):
            if ".venv" in path.parts:
                continue
            rel = path.relative_to(package / "src").as_posix()
            problems += [f"{package.name}/src/{rel}:{p}" for p in _context_reads(path, members)]
    assert not problems, (
        "a plugin reads a context attribute that BackendContext does not offer (the state "
        "singleton, a private name): add a named, read-only member to BackendContext instead:\n"
        + "\n".join(problems)
    )


def test_the_attribute_check_sees_state_and_private_reads(tmp_path):
    source = tmp_path / "x.py"
    source.write_text(
        "from accel.backends import Backend\n\n"
        "class B(Backend):\n"
        "    def setup(self):\n"
        "        run = self.context\n"
        "        run.state.set_process_layout()\n"
        "        getattr(self.context, 'state', None)\n"
        "        return self.precision.context._state, run.device, self.context.plugins\n\n"
        "def helper(context):\n    return context.state.fsdp_plugin\n"
    )
    reads = _context_reads(source, _context_members())
    assert [r.split(":")[0] for r in reads] == ["6", "7", "8", "11"], reads
