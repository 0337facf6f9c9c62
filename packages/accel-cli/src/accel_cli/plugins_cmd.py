"""``accel plugins``: the installed plugins, their versions, the accel-core range each
declares (``core_range``), their hooks and load errors."""

from __future__ import annotations

import json
from collections.abc import Iterable

from .parsing import Parser


def main(argv: list[str], prog: str = "accel plugins") -> int:
    """Print the plugins ``accel`` sees (``--json`` for a machine-readable list)."""
    parser = Parser(
        prog=prog,
        description="List accel's plugins: core's default ones and every installed entry point "
        "of the `accel` group, with the accel-core versions each declares it supports "
        "(core_range), their hooks and any error raised while loading them. "
        "ACCEL_PLUGINS / ACCEL_DISABLE_PLUGINS restrict which load.",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    from accel.plugins import list_plugins

    infos = list_plugins()
    if args.json:
        launchers = _launchers()
        out = [dict(i.to_dict(), launchers=launchers.get(i.name, [])) for i in infos]
        print(json.dumps(out, indent=2))
        return 0
    rows = [
        (
            i.name + (" (default)" if i.default else ""),
            i.distribution or "?",
            i.version or "?",
            _core_range(i),
            ("ERROR: " + i.error)
            if i.error
            else ", ".join(h.removeprefix("accel_") for h in i.hooks),
        )
        for i in infos
    ]
    header = ("plugin", "distribution", "version", "core_range", "hooks")
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header) - 1)]
    for row in [header, *rows]:
        cells = [f"{cell:<{width}}" for cell, width in zip(row, widths)]
        print("  ".join([*cells, row[-1]]))
    return 1 if any(i.error for i in infos) else 0


def _core_range(info) -> str:
    """The table cell: the declared range, flagged when it excludes the installed core."""
    if info.default:
        return "(core)"
    if not info.core_range:
        return "-"
    from importlib import metadata

    from accel.plugins.manager import range_contains

    core = metadata.version("accel-core")
    if not range_contains(info.core_range, core):
        return f"{info.core_range} (excludes {core})"
    return info.core_range


def _launchers() -> dict[str, list[str]]:
    """``{plugin name: [launcher names]}``."""
    from accel.plugins import get_plugin_manager

    pm = get_plugin_manager()
    table: dict[str, list[str]] = {}
    for impl in pm.hook.accel_launchers.get_hookimpls():
        try:
            found = impl.function()
            classes = list(found) if isinstance(found, Iterable) else []
        except Exception:
            continue
        name = impl.plugin_name.rsplit(".", 1)[-1]
        table.setdefault(name, []).extend(getattr(c, "name", "?") for c in classes)
    return table
