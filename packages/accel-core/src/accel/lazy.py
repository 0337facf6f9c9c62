"""Lazy module attributes: the one way every accel package exports names it does not import yet.

A package lists its public names once, in a ``{name: module}`` table, and builds its module
``__getattr__`` and ``__dir__`` from it with :func:`exports`; type checkers and editors follow
the same names through real imports under ``TYPE_CHECKING``::

    from typing import TYPE_CHECKING

    from accel.lazy import exports

    if TYPE_CHECKING:  # what type checkers and editors follow
        from accel_mine.config import MineConfig as MineConfig

    _NAMES = {"MineConfig": "accel_mine.config"}
    __all__ = sorted(_NAMES)
    __getattr__, __dir__ = exports(__name__, _NAMES)

Importing the package then imports none of those modules (``accel launch`` imports every
plugin's entry-point module, so this keeps registration free of torch); each name is imported
on first use and kept in the package's namespace. ``integration-tests/structure`` checks that
the ``TYPE_CHECKING`` imports and the table agree, and that no module of the workspace writes a
module ``__getattr__`` of its own.

Names owned by a plugin and offered under ``accel`` / ``accel.utils`` come from the installed
plugins' ``accel_exports`` hook (:func:`plugin_export`); a first-party plugin builds that
hook's table from :data:`accel.catalog.EXPORTS` with :func:`catalog_exports`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

ModuleGetattr = Callable[[str], Any]
"""A module ``__getattr__``. Its result is ``Any`` on purpose: the names it serves are typed
through the module's ``TYPE_CHECKING`` imports; what reaches it at type-checking time is a
plugin-provided name known only at run time."""

ModuleDir = Callable[[], list[str]]
"""A module ``__dir__``."""


def exports(
    package: str,
    names: Mapping[str, str],
    *,
    computed: Mapping[str, Callable[[], object]] | None = None,
    fallback: Callable[[str], object] | None = None,
    fallback_names: Callable[[], Iterable[str]] | None = None,
) -> tuple[ModuleGetattr, ModuleDir]:
    """The ``__getattr__`` and ``__dir__`` of module ``package`` serving ``names`` lazily.

    ``names`` maps each public name to the absolute name of the module defining it. When that
    module belongs to another distribution that is not installed (``accel.tracking``'s
    ``WandBTracker`` from ``accel_trackers``), the access raises
    :class:`~accel.errors.MissingPluginError` naming the package to install.
    ``computed`` maps names to functions computing them on first use (``__version__``).
    ``fallback`` answers any other public name that is not a submodule (``accel``'s
    plugin-owned names: :func:`plugin_export`) or raises AttributeError; its answers are not
    kept, as the installed plugins may change. ``fallback_names`` adds to ``dir()``.
    """
    module = sys.modules[package]
    extra = dict(computed or {})

    def __getattr__(name: str) -> Any:
        target = names.get(name)
        if target is not None:
            value = _import_attribute(name, target, package)
        elif name in extra:
            value = extra[name]()
        elif fallback is None or name.startswith("_") or _is_submodule(package, name):
            # a submodule not imported yet: AttributeError lets ``from package import name``
            # load it
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        else:
            try:
                return fallback(name)
            except AttributeError:
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        setattr(module, name, value)  # the next access finds it without this function
        return value

    def __dir__() -> list[str]:
        listed = fallback_names() if fallback_names is not None else ()
        return sorted({*vars(module), *names, *extra, *listed})

    return __getattr__, __dir__


def _is_submodule(package: str, name: str) -> bool:
    return importlib.util.find_spec(f"{package}.{name}") is not None


def _import_attribute(name: str, module_name: str, package: str) -> object:
    top = module_name.partition(".")[0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != top or top == package.partition(".")[0]:
            raise
        from accel import catalog
        from accel.errors import MissingPluginError

        row = catalog.provider(name)
        raise MissingPluginError(name, row.package if row else top.replace("_", "-")) from None
    return getattr(module, name)


def installed_version(distribution: str) -> Callable[[], str]:
    """A ``computed`` entry for ``__version__``: ``distribution``'s installed version, read on
    first use (importing ``importlib.metadata`` is not free); ``0+unknown`` when not installed
    (as :func:`accel.imports.installed_version`)."""

    def version() -> str:
        import importlib.metadata

        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path
            return "0+unknown"

    return version


def plugin_export(name: str) -> object:
    """The object an installed plugin exports as ``name`` through its ``accel_exports`` hook.

    Raises :class:`~accel.errors.MissingPluginError` naming the package when no installed
    plugin exports it but first-party accel offers it (:data:`accel.catalog.EXPORTS`), else
    AttributeError.
    """
    from accel import catalog
    from accel.errors import MissingPluginError
    from accel.plugins import registry

    target = registry.exports().get(name)
    if target is not None:
        module_name, _, attribute = target.partition(":")
        return getattr(importlib.import_module(module_name), attribute or name)
    row = catalog.EXPORTS.get(name)
    if row is not None:
        raise MissingPluginError(name, row.package)
    raise AttributeError(name)


def plugin_export_names() -> set[str]:
    """The plugin-owned names ``dir(accel)`` lists: first-party accel's (no plugin is loaded)."""
    from accel import catalog

    return set(catalog.EXPORTS)


def catalog_exports(distribution: str, package: str) -> dict[str, str]:
    """A first-party plugin's ``accel_exports`` table: each name :data:`accel.catalog.EXPORTS`
    gives ``distribution``, served by the lazy attributes of ``package`` (its ``__init__``)."""
    from accel import catalog

    return {name: f"{package}:{name}" for name in catalog.exports_of(distribution)}


__all__ = [
    "ModuleDir",
    "ModuleGetattr",
    "catalog_exports",
    "exports",
    "installed_version",
    "plugin_export",
    "plugin_export_names",
]
