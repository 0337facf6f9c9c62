"""Lazy re-exports of plugin-owned names under ``accel`` and ``accel.utils``.

One mechanism: installed plugins say what they export through the ``accel_exports``
hook (:func:`accel.plugins.registry.exports`); the target module is imported only when
the name is first used. When no installed plugin exports a name that first-party accel
offers, :data:`accel.catalog.EXPORTS` names the package to install.
"""

from __future__ import annotations

import importlib
from typing import Any

from accel import catalog
from accel.errors import MissingPluginError


def resolve(name: str) -> Any:
    """The object a plugin exports as ``name``; MissingPluginError naming its package if absent."""
    from accel.plugins import registry

    target = registry.exports().get(name)
    if target is not None:
        module_name, _, attribute = target.partition(":")
        return getattr(importlib.import_module(module_name), attribute or name)
    row = catalog.EXPORTS.get(name)
    if row is not None:
        raise MissingPluginError(name, row.package)
    raise AttributeError(name)


def exported_names() -> set[str]:
    """Every plugin-owned name ``dir(accel)`` lists: first-party ones and those installed plugins export."""
    return set(catalog.EXPORTS)


def plugin_attribute(name: str, module_name: str, package: str) -> Any:
    """``module_name.name``, or MissingPluginError naming ``package`` when that module is absent."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name.split(".")[0]:
            raise
        raise MissingPluginError(name, package) from None
    return getattr(module, name)
