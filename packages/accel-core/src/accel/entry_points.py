"""The ``accel`` entry points, read without :mod:`importlib.metadata` or the plugin manager.

``accel launch --help`` builds its parser from the declarations of the installed plugins;
finding them through importlib.metadata and pluggy costs more than the rest of the command.
This module reads the entry-point files of the installed distributions itself
(``<name>-<version>.dist-info/entry_points.txt`` in each directory of ``sys.path``, the first
distribution of a name winning, as importlib.metadata does) and falls back to importlib.metadata
where ``sys.path`` holds anything else (a zip file). Imports neither pluggy nor torch.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from typing import Any

from accel import environment

GROUP = "accel"
"""The entry-point group of accel plugins."""


@dataclass(frozen=True)
class EntryPoint:
    """One ``accel`` entry point: its name, ``module[:attribute]`` and distribution."""

    name: str
    value: str
    distribution: str

    def load(self) -> Any:
        """The object the entry point names (importing its module)."""
        module, _, attribute = self.value.partition(":")
        found: Any = importlib.import_module(module.strip())
        for part in attribute.strip().split(".") if attribute.strip() else ():
            found = getattr(found, part)
        return found


def selected(name: str) -> bool:
    """Whether the plugin ``name`` loads (:func:`accel.environment.plugin_selected`)."""
    return environment.plugin_selected(name)


def entry_points() -> list[EntryPoint]:
    """Every installed ``accel`` entry point, sorted by name (selected or not)."""
    found = _scan()
    if found is None:
        from importlib import metadata

        found = [
            EntryPoint(ep.name, ep.value, ep.dist.name if ep.dist is not None else "")
            for ep in metadata.entry_points(group=GROUP)
        ]
    return sorted(found, key=lambda ep: ep.name)


def _scan() -> list[EntryPoint] | None:
    """The entry points from the ``.dist-info`` directories on ``sys.path``; None when a path
    entry is not a plain directory (importlib.metadata then reads them)."""
    seen: set[str] = set()
    found: list[EntryPoint] = []
    for entry in sys.path:
        directory = entry or "."
        if os.path.isfile(directory):
            return None  # a zip file: importlib.metadata knows how to read it
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            project = name.rpartition(".")[0].partition("-")[0]
            key = project.replace("-", "_").replace(".", "_").lower()
            if key in seen:
                continue
            seen.add(key)
            path = os.path.join(directory, name, "entry_points.txt")
            try:
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
            except OSError:
                continue
            distribution = project.replace("_", "-")
            found.extend(EntryPoint(n, v, distribution) for n, v in _group(text, GROUP))
    return found


def _group(text: str, group: str) -> list[tuple[str, str]]:
    """``(name, value)`` of each entry in ``[group]`` of an ``entry_points.txt`` (INI) file."""
    entries: list[tuple[str, str]] = []
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
            continue
        if current == group and "=" in line:
            name, _, value = line.partition("=")
            entries.append((name.strip(), value.strip()))
    return entries


__all__ = ["GROUP", "EntryPoint", "entry_points", "selected"]
