"""Resolve names (distributed types, precisions, trackers, ...) to plugin classes.

Everything a plugin contributes is looked up here, in one place. Asking for a
name no installed plugin provides raises :class:`~accel.errors.MissingPluginError`
naming the package to install.
"""

from __future__ import annotations

import functools

from accel import catalog
from accel.errors import MissingPluginError
from accel.plugins.manager import hook, on_reset


def _collect(results: list[list[type]], key) -> dict[str, type]:
    table: dict[str, type] = {}
    # pluggy returns the last-registered plugin first: entry points override defaults.
    for classes in reversed(results):
        for cls in classes or []:
            for name in key(cls):
                table[name] = cls
    return table


@functools.cache
def backends() -> dict[str, type]:
    """``{distributed_type: Backend subclass}`` over all installed plugins."""
    return _collect(hook().accel_backends(), lambda c: c.distributed_types)


@functools.cache
def backends_by_name() -> dict[str, type]:
    """``{Backend.name: Backend subclass}`` over all installed plugins: what ``ACCEL_BACKEND`` selects.

    Unlike :func:`backends` it also lists a backend that claims no distributed type, or one
    whose types another plugin serves too.
    """
    return _collect(hook().accel_backends(), lambda c: (c.name,))


@functools.cache
def precisions() -> dict[str, type]:
    """``{mixed_precision name: Precision subclass}``."""
    return _collect(hook().accel_precisions(), lambda c: c.names)


@functools.cache
def trackers() -> dict[str, type]:
    """``{tracker name: GeneralTracker subclass}``."""
    return _collect(hook().accel_trackers(), lambda c: (c.name,))


@functools.cache
def launchers() -> dict[str, type]:
    """``{launcher name: Launcher subclass}``."""
    return _collect(hook().accel_launchers(), lambda c: (c.name,))


@functools.cache
def quantizers() -> dict[str, type]:
    """``{quantizer name: Quantizer subclass}``."""
    return _collect(hook().accel_quantizers(), lambda c: (c.name,))


@functools.cache
def exports() -> dict[str, str]:
    """``{public name: "module:attribute"}`` re-exported by installed plugins."""
    table: dict[str, str] = {}
    for mapping in reversed(hook().accel_exports()):
        table.update(mapping or {})
    return table


def clear_cache() -> None:
    """Forget every resolved table (after the plugin manager is rebuilt)."""
    for fn in (backends, backends_by_name, precisions, trackers, launchers, quantizers, exports):
        fn.cache_clear()


def _missing(kind: str, name: str) -> MissingPluginError:
    row = catalog.provider(name)
    if row is None:
        return MissingPluginError(f"{kind} {name!r}", f"a plugin providing {kind} {name!r}")
    return MissingPluginError(row.feature, row.package)


def get_backend(distributed_type: str) -> type:
    """The Backend class serving ``distributed_type``, or an error naming the package."""
    try:
        return backends()[str(distributed_type)]
    except KeyError:
        raise _missing("distributed type", str(distributed_type)) from None


def get_precision(name: str) -> type:
    """The Precision class for ``mixed_precision=name``."""
    try:
        return precisions()[name]
    except KeyError:
        if catalog.needs_plugin(name):
            raise _missing("precision", name) from None
        allowed = ", ".join(sorted(precisions()))
        raise ValueError(f"unknown mixed_precision {name!r}: use one of {allowed}") from None


def get_tracker(name: str) -> type:
    """The tracker class registered as ``name``."""
    try:
        return trackers()[name]
    except KeyError:
        row = catalog.TRACKERS.get(name)
        package = row.package if row else f"a plugin providing the {name!r} tracker"
        raise MissingPluginError(
            f"the {name!r} tracker",
            package,
            f" (installed trackers: {', '.join(sorted(trackers())) or 'none'})",
        ) from None


def get_quantizer(name: str) -> type:
    """The Quantizer class registered as ``name``."""
    try:
        return quantizers()[name]
    except KeyError:
        raise _missing("quantizer", name) from None


on_reset(clear_cache)

__all__ = [
    "backends",
    "backends_by_name",
    "clear_cache",
    "exports",
    "get_backend",
    "get_precision",
    "get_quantizer",
    "get_tracker",
    "launchers",
    "precisions",
    "quantizers",
    "trackers",
]
