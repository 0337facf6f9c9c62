"""The plugin system: the manager over the ``accel`` entry-point group, and the registry.

:mod:`accel.plugins.manager` builds the one pluggy manager (default plugins first, then
entry points); :mod:`accel.plugins.registry` resolves names to the classes plugins
contribute. The hook specifications are in :mod:`accel.hookspecs`.
"""

from __future__ import annotations

from accel.plugins.manager import (
    DEFAULT_PLUGINS,
    CoreVersionWarning,
    PluginInfo,
    get_plugin_manager,
    hook,
    list_plugins,
    on_reset,
    reset_plugin_manager,
)

__all__ = [
    "DEFAULT_PLUGINS",
    "CoreVersionWarning",
    "PluginInfo",
    "get_plugin_manager",
    "hook",
    "list_plugins",
    "on_reset",
    "reset_plugin_manager",
]
