"""Members that forward to a component: how a facade exposes what its parts already say.

The :class:`~accel.Accelerator` answers ``accelerator.process_index`` or
``accelerator.on_main_process`` by asking one of its components (the backend context,
the process-wide state). These helpers build those members from the component's own
definition, so its docstring and signature are written once, where the logic is.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from typing import Any


def _doc_of(source: type | None, name: str) -> str | None:
    member = getattr(source, name, None) if source is not None else None
    return getattr(member, "__doc__", None)


def forward_property(
    component: str,
    name: str,
    source: type | None = None,
    writable: bool = False,
    doc: str | None = None,
) -> Any:
    """A property reading ``owner.<component>.<name>`` (and writing it when ``writable``).

    The docstring is ``doc``, else the one ``source`` (the component's class) gives
    ``name``, if any (an instance attribute has none: pass ``doc``). Add a setter of your
    own with ``.setter(...)`` where the write goes elsewhere.
    """

    def get(owner: Any) -> Any:
        return getattr(getattr(owner, component), name)

    def set_(owner: Any, value: Any) -> None:
        setattr(getattr(owner, component), name, value)

    doc = doc or _doc_of(source, name) or f"``{component}.{name}``."
    return property(get, set_ if writable else None, doc=doc)


def forward_method(component: str, name: str, source: type) -> Callable:
    """A method calling ``owner.<component>.<name>(...)``, with that method's name, doc and signature."""

    @functools.wraps(getattr(source, name))
    def method(owner: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(getattr(owner, component), name)(*args, **kwargs)

    return method


def module_attributes(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each of ``names`` (name -> submodule) is
    imported from ``package.<submodule>`` on first use and kept in the package's namespace.

    A plugin's ``__init__`` lists its public names this way, so importing the plugin (as
    ``accel launch --help`` does) imports none of its heavy modules.
    """

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


__all__ = ["forward_method", "forward_property", "module_attributes"]
