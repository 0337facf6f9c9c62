"""The ``accel`` entry points, read without :mod:`importlib.metadata`.

The plugin manager (:mod:`accel.plugins.manager`) loads the installed plugins from here on
every ``accel`` command, ``accel launch --help`` included; importing importlib.metadata and
scanning every distribution's metadata would cost more than the rest of that command.
This module reads the entry-point files of the installed distributions itself
(``<name>-<version>.dist-info/entry_points.txt`` in each directory of ``sys.path``, the first
distribution of a name winning, as importlib.metadata does) and falls back to importlib.metadata
where ``sys.path`` holds anything else (a zip file). Imports neither pluggy nor torch.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib import metadata

GROUP = "accel"
"""The entry-point group of accel plugins."""


@dataclass(frozen=True)
class Distribution:
    """The installed distribution an entry point comes from: what the plugin manager reports."""

    metadata_dir: str | None
    """Its ``.dist-info`` folder, whose ``METADATA`` is read when a fact is asked for (None:
    the facts were given, read through importlib.metadata)."""
    given: tuple[str, str | None, tuple[str, ...]] | None = None
    """``(name, version, Requires-Dist lines)`` when already known."""

    @functools.cached_property
    def _facts(self) -> tuple[str, str | None, tuple[str, ...]]:
        if self.given is not None:
            return self.given
        name, version, requires = "", None, []
        try:
            with open(os.path.join(self.metadata_dir or "", "METADATA"), encoding="utf-8") as f:
                for line in f:
                    if not line.strip():
                        break  # the headers end at the first blank line
                    key, _, value = line.partition(":")
                    if key == "Name":
                        name = value.strip()
                    elif key == "Version":
                        version = value.strip()
                    elif key == "Requires-Dist":
                        requires.append(value.strip())
        except OSError:
            pass
        if not name:  # no METADATA: the folder's name, as installers write it
            stem = os.path.basename(self.metadata_dir or "").rpartition(".")[0]
            name, _, folder_version = stem.partition("-")
            version = version or folder_version or None
        return name, version, tuple(requires)

    @property
    def name(self) -> str:
        """Its name, as its ``METADATA`` spells it."""
        return self._facts[0]

    @property
    def version(self) -> str | None:
        """Its version."""
        return self._facts[1]

    @property
    def requires(self) -> list[str]:
        """Its ``Requires-Dist`` lines."""
        return list(self._facts[2])


@dataclass(frozen=True)
class EntryPoint:
    """One ``accel`` entry point: its name, ``module[:attribute]`` and distribution."""

    name: str
    value: str
    dist: Distribution

    @property
    def distribution(self) -> str:
        """The name of its distribution."""
        return self.dist.name

    def load(self) -> object:
        """The object the entry point names (importing its module)."""
        module, _, attribute = self.value.partition(":")
        found: object = importlib.import_module(module.strip())
        for part in attribute.strip().split(".") if attribute.strip() else ():
            found = getattr(found, part)
        return found


def entry_points() -> list[EntryPoint]:
    """Every installed ``accel`` entry point, sorted by name (selected or not)."""
    found = _scan()
    if found is None:
        from importlib import metadata

        found = [
            EntryPoint(ep.name, ep.value, _dist(ep)) for ep in metadata.entry_points(group=GROUP)
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
            dist = Distribution(os.path.join(directory, name))
            found.extend(EntryPoint(n, v, dist) for n, v in _group(text, GROUP))
    return found


def version(distribution: str) -> str | None:
    """The installed version of ``distribution`` (from its ``.dist-info`` folder's name), or None."""
    key = distribution.replace("-", "_").replace(".", "_").lower()
    for entry in sys.path:
        directory = entry or "."
        if os.path.isfile(directory):
            break
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            stem, _, suffix = name.rpartition(".")
            project, _, found = stem.partition("-")
            if suffix == "dist-info" and project.replace(".", "_").lower() == key:
                return found or None
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _dist(ep: metadata.EntryPoint) -> Distribution:
    if ep.dist is None:
        return Distribution(None, ("", None, ()))
    return Distribution(None, (ep.dist.name, ep.dist.version, tuple(ep.dist.requires or ())))


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


__all__ = ["GROUP", "Distribution", "EntryPoint", "entry_points", "version"]
