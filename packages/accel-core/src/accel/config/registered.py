"""The config sections the loaded plugins declare (their ``accel_config_sections`` hook).

Apart from :mod:`accel.config.options` because it needs the plugin manager, while the
declarations sit below it: the plugin manager itself reads its variables through them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from accel.config.options import Section


def section_table(result: Any) -> dict[str, Any]:
    """One plugin's ``accel_config_sections`` result as ``{section key: validator}``.

    Accepts the mapping form (``{key: Section or validator}``) and an iterable of
    :class:`Section` objects; None gives ``{}``.
    """
    if not result:
        return {}
    if isinstance(result, Section):
        return {result.key: result}
    if isinstance(result, Mapping):
        return dict(result)
    table: dict[str, Any] = {}
    for item in result if isinstance(result, Iterable) else ():
        if not isinstance(item, Section):
            raise TypeError(f"accel_config_sections returned {item!r}; expected Section objects")
        table[item.key] = item
    return table


def section_validators() -> dict[str, Callable[[dict], list[str]]]:
    """``{section_key: validator}`` from every plugin's ``accel_config_sections`` hook.

    A declared :class:`~accel.config.options.Section` is its own validator; a plugin may
    return a mapping or a list of Sections (see the hook's documentation).
    """
    from accel.plugins import hook

    table: dict[str, Callable[[dict], list[str]]] = {}
    for result in reversed(hook().accel_config_sections()):
        table.update(section_table(result))
    return table


def registered_sections() -> dict[str, Section]:
    """Every declared :class:`Section` the loaded plugins register, by key.

    Legacy ``{key: validator}`` entries have no declaration and are left out (see
    :func:`accel.config.registered.section_validators` for every validator).
    """
    return {key: v for key, v in section_validators().items() if isinstance(v, Section)}


__all__ = ["registered_sections", "section_table", "section_validators"]
