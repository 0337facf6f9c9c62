"""Which plugin serves a feature, and the error when it is missing, failed or kept out.

A distributed type, ``fp8`` or a config section may need a plugin package
(:data:`~accel.config.core_options.PROVIDERS`, :data:`~accel.config.core_options.SECTION_PROVIDERS`);
:func:`require_plugin` raises :class:`~accel.errors.MissingPluginError` naming the package and,
when it is installed, why it did not load (an import error, or ``ACCEL_PLUGINS`` /
``ACCEL_DISABLE_PLUGINS``). The plugin manager is imported only when a check runs.
"""

from __future__ import annotations

from accel.config.core_options import PROCESS_SECTION, PROVIDERS, SECTION_PROVIDERS
from accel.errors import MissingPluginError


def _loaded_plugin_distributions() -> set[str]:
    from accel.plugins import list_plugins

    return {info.distribution for info in list_plugins() if info.distribution and not info.error}


def _plugin_error(package: str) -> str | None:
    from accel.plugins import list_plugins

    for info in list_plugins():
        if info.distribution == package and info.error:
            return info.error
    return None


def require_plugin(name: str, feature: str, where: str = "") -> None:
    """Raise MissingPluginError when the package serving ``name`` (a distributed type,
    ``fp8`` or a section key) is not installed and loaded."""
    package = PROVIDERS.get(name) or SECTION_PROVIDERS.get(name)
    if package is None or not package.startswith("accel-"):
        return
    if package in _loaded_plugin_distributions():
        return
    failed = _plugin_error(package)
    extra = f" ({package} is installed but failed to load: {failed})" if failed else ""
    if not failed and installed_but_disabled(package):
        extra = f" ({package} is installed but not loaded: {disabled_by()})"
    prefix = f"{where}: " if where else ""
    raise MissingPluginError(f"{prefix}{feature}", package, extra)


def installed_but_disabled(package: str) -> bool:
    """Whether ``package`` is installed while ``ACCEL_PLUGINS`` / ``ACCEL_DISABLE_PLUGINS`` keep it out."""
    from importlib import metadata

    if disabled_by() is None:
        return False
    try:
        metadata.distribution(package)
    except metadata.PackageNotFoundError:
        return False
    return True


def disabled_by() -> str | None:
    """``ACCEL_PLUGINS=...`` / ``ACCEL_DISABLE_PLUGINS=...`` when either restricts loading."""
    for option in (PROCESS_SECTION["plugins"], PROCESS_SECTION["disable_plugins"]):
        names = option.from_env()
        if names is not None and (option.name == "plugins" or names):
            return f"{option.env}={','.join(names)}"
    return None


__all__ = ["disabled_by", "installed_but_disabled", "require_plugin"]
