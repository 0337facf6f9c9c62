"""The plugin manager: built lazily, once, over the ``accel`` entry-point group.

Core's default plugins are registered first, then every installed distribution's
``accel`` entry points. A plugin that fails to import is recorded (see
:func:`list_plugins`) and the others keep working. ``ACCEL_PLUGINS`` restricts
loading to the named entry points; ``ACCEL_DISABLE_PLUGINS`` excludes some.

A plugin distribution declares the accel-core versions it supports in its own
dependencies (``accel-core>=0.1,<0.2``); when the installed accel-core is outside that
range, a :class:`CoreVersionWarning` naming both versions is issued, once per
distribution and process, as the plugin's entry points are loaded.
"""

from __future__ import annotations

import importlib
import re
import threading
import warnings
from dataclasses import dataclass, field

import pluggy

from accel import hookspecs
from accel.config.core_options import PROCESS_SECTION
from accel.entry_points import Distribution, EntryPoint, entry_points
from accel.entry_points import version as installed_version

DEFAULT_PLUGINS = (
    "accel.default_plugins.single_process",
    "accel.default_plugins.native_precision",
    "accel.default_plugins.local_launchers",
)
"""Modules of core registered through the same hooks as third-party plugins."""


@dataclass
class PluginInfo:
    """One plugin as :func:`list_plugins` reports it."""

    name: str
    distribution: str | None
    version: str | None
    hooks: list[str] = field(default_factory=list)
    error: str | None = None
    default: bool = False
    core_range: str | None = None
    """The accel-core versions the distribution declares it supports (``>=0.1,<0.2``),
    None for core's own plugins and distributions that declare no range."""

    def to_dict(self) -> dict:
        """A JSON-friendly dict of this record."""
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "hooks": list(self.hooks),
            "error": self.error,
            "default": self.default,
            "core_range": self.core_range,
        }


class CoreVersionWarning(UserWarning):
    """An installed plugin declares an accel-core range that excludes the installed accel-core."""


_CORE_REQUIREMENT = re.compile(
    r"^\s*accel[-_.]core(?![\w.-])\s*(?:\[[^\]]*\])?\s*\(?\s*(?P<spec>(?:[<>=!~][^;()]*)?)\)?"
    r"\s*(?:;(?P<marker>.*))?$",
    re.I,
)
_SIMPLE_CLAUSE = re.compile(r"^(?P<op>>=|<=|==|!=|<|>)\s*(?P<version>\d+(?:\.\d+)*)$")
_ranges: dict[str, str | None] = {}  # distribution name -> its declared accel-core range
_warned: set[str] = set()  # distributions already warned about, for the whole process


def core_range(dist: Distribution) -> str | None:
    """The accel-core specifier ``dist`` declares in its ``Requires-Dist`` (None when none).

    Requirements guarded by an extra, or by a marker that does not hold here, are ignored.
    Read with a regular expression (``packaging.markers`` only for a line with a marker), so
    building the plugin manager stays cheap.
    """
    name = dist.name
    if name in _ranges:
        return _ranges[name]
    found: str | None = None
    for line in dist.requires or ():
        match = _CORE_REQUIREMENT.match(line)
        if match is None:
            continue
        if match["marker"] and not _marker_holds(match["marker"]):
            continue
        clauses = [c.replace(" ", "") for c in match["spec"].split(",") if c.strip()]
        # lower bounds first, as people write them: ">=0.1,<0.2"
        found = ",".join(sorted(clauses, key=lambda c: (c[0] != ">", c))) or None
        break
    _ranges[name] = found
    return found


def _marker_holds(marker: str) -> bool:
    from packaging.markers import InvalidMarker, Marker

    try:
        return Marker(marker).evaluate({"extra": ""})
    except InvalidMarker:
        return False


def _simple_contains(declared: str, version: str) -> bool | None:
    """``version in SpecifierSet(declared)`` for plain numeric versions and ``<``, ``>=``, ...
    clauses, without importing packaging; None when anything else is involved."""
    if not re.fullmatch(r"\d+(?:\.\d+)*", version):
        return None
    have = tuple(int(x) for x in version.split("."))
    for clause in declared.split(","):
        match = _SIMPLE_CLAUSE.match(clause.strip())
        if match is None:
            return None
        want = tuple(int(x) for x in match["version"].split("."))
        width = max(len(have), len(want))
        a, b = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
        op = match["op"]
        ok = {
            ">=": a >= b,
            "<=": a <= b,
            ">": a > b,
            "<": a < b,
            "==": a == b,
            "!=": a != b,
        }[op]
        if not ok:
            return False
    return True


def range_contains(declared: str, version: str) -> bool:
    """Whether ``version`` satisfies the specifier ``declared`` (``packaging.specifiers``
    semantics, pre-releases included; a fast path covers plain ``>=0.1,<0.2`` ranges)."""
    simple = _simple_contains(declared, version)
    if simple is not None:
        return simple
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return SpecifierSet(declared).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return True  # unreadable: do not warn about what cannot be judged


def check_core_range(distribution: str, declared: str | None, core_version: str | None) -> bool:
    """Warn (once per process for ``distribution``) when ``declared`` excludes ``core_version``.

    Returns True when the installed core is inside the declared range (or either is unknown).
    """
    if not declared or not core_version:
        return True
    inside = range_contains(declared, core_version)
    if not inside and distribution not in _warned:
        _warned.add(distribution)
        warnings.warn(
            f"the installed plugin {distribution} declares accel-core{declared}, but "
            f"accel-core {core_version} is installed; install the {distribution} release "
            f"made for accel-core {core_version} (or accel-core{declared})",
            CoreVersionWarning,
            stacklevel=2,
        )
    return inside


_lock = threading.Lock()
_manager: pluggy.PluginManager | None = None
_infos: list[PluginInfo] = []


def _entry_points() -> list[EntryPoint]:
    return entry_points()


def plugin_selected(name: str) -> bool:
    """Whether the entry-point plugin ``name`` loads: listed in ``ACCEL_PLUGINS`` (when set;
    set and empty: none) and not in ``ACCEL_DISABLE_PLUGINS``."""
    allowed = PROCESS_SECTION["plugins"].from_env()
    if allowed is not None and name not in allowed:
        return False
    return name not in PROCESS_SECTION["disable_plugins"].from_env()


def _build() -> pluggy.PluginManager:
    pm = pluggy.PluginManager("accel")
    pm.add_hookspecs(hookspecs)
    infos: list[PluginInfo] = []
    core_version = _version("accel-core")
    for module_name in DEFAULT_PLUGINS:
        module = importlib.import_module(module_name)
        pm.register(module, name=module_name)
        infos.append(
            PluginInfo(
                module_name.rsplit(".", 1)[-1],
                "accel-core",
                core_version,
                _hook_names(pm, module),
                default=True,
            )
        )
    for ep in _entry_points():
        if not plugin_selected(ep.name) or pm.has_plugin(ep.name):
            continue
        dist = ep.dist.name or None
        version = ep.dist.version
        declared = core_range(ep.dist) if dist is not None else None
        if dist is not None:
            check_core_range(dist, declared, core_version)
        try:
            module = ep.load()
            pm.register(module, name=ep.name)
        except Exception as exc:  # a broken plugin must not break the others
            error = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line
            infos.append(PluginInfo(ep.name, dist, version, error=error, core_range=declared))
            continue
        hooks = _hook_names(pm, module)
        infos.append(PluginInfo(ep.name, dist, version, hooks, core_range=declared))
    global _infos
    _infos = infos
    return pm


def _hook_names(pm: pluggy.PluginManager, plugin: object) -> list[str]:
    return sorted(caller.name for caller in (pm.get_hookcallers(plugin) or []))


def _version(dist: str) -> str | None:
    return installed_version(dist)


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, built on first use."""
    global _manager
    if _manager is None:
        with _lock:
            if _manager is None:
                _manager = _build()
    return _manager


def reset_plugin_manager() -> None:
    """Forget the plugin manager so the next use rebuilds it (after changing ``ACCEL_PLUGINS``)."""
    global _manager
    with _lock:
        _manager = None
    for callback in _reset_callbacks:
        callback()


_reset_callbacks: list = []


def on_reset(callback) -> None:
    """Call ``callback()`` whenever :func:`reset_plugin_manager` runs (caches built over hooks)."""
    _reset_callbacks.append(callback)


def list_plugins() -> list[PluginInfo]:
    """Every plugin seen: default ones, loaded entry points and those that failed to load."""
    get_plugin_manager()
    return list(_infos)


def hook():
    """The hook relay of the plugin manager (``hook().accel_backends()``)."""
    return get_plugin_manager().hook
