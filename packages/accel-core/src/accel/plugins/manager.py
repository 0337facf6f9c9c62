"""The plugin manager: built lazily, once, over the ``accel`` entry-point group.

Core's default plugins are registered first, then every installed distribution's
``accel`` entry points. A plugin that fails to import is recorded (see
:func:`list_plugins`) and the others keep working. ``ACCEL_PLUGINS`` restricts
loading to the named entry points; ``ACCEL_DISABLE_PLUGINS`` excludes some.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from importlib import metadata

import pluggy

from accel import environment, hookspecs

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

    def to_dict(self) -> dict:
        """A JSON-friendly dict of this record."""
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "hooks": list(self.hooks),
            "error": self.error,
            "default": self.default,
        }


_lock = threading.Lock()
_manager: pluggy.PluginManager | None = None
_infos: list[PluginInfo] = []


def _entry_points() -> list[metadata.EntryPoint]:
    return sorted(metadata.entry_points(group="accel"), key=lambda ep: ep.name)


def _selected(name: str) -> bool:
    allowed = environment.get_list(environment.PLUGINS)
    disabled = environment.get_list(environment.DISABLE_PLUGINS) or []
    if allowed is not None and name not in allowed:
        return False
    return name not in disabled


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
        if not _selected(ep.name) or pm.has_plugin(ep.name):
            continue
        dist = ep.dist.name if ep.dist is not None else None
        version = ep.dist.version if ep.dist is not None else None
        try:
            module = ep.load()
            pm.register(module, name=ep.name)
        except Exception as exc:  # a broken plugin must not break the others
            infos.append(PluginInfo(ep.name, dist, version, error=f"{type(exc).__name__}: {exc}"))
            continue
        infos.append(PluginInfo(ep.name, dist, version, _hook_names(pm, module)))
    global _infos
    _infos = infos
    return pm


def _hook_names(pm: pluggy.PluginManager, plugin: object) -> list[str]:
    return sorted(caller.name for caller in (pm.get_hookcallers(plugin) or []))


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


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
