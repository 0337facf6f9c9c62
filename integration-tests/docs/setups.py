"""Named setups a docs block can ask for with ``<!-- docs-test: setup NAME -->``.

A setup may return a function, called after the block (to undo what it did).

Each takes the page's namespace (a dict) and prepares it, as a reader would have done
before running the block (installing a plugin, importing the names the prose assumes).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def accelerator(ns: dict[str, Any]) -> None:
    """``import torch`` and ``from accel import Accelerator``."""
    import torch
    from accel import Accelerator

    ns.update(torch=torch, Accelerator=Accelerator)


def jsonl_plugin(ns: dict[str, Any]) -> Callable[[], None]:
    """Register ``accel_jsonl.plugin`` (written by the page's file blocks) as if installed."""
    from accel import plugins

    accelerator(ns)
    module = importlib.import_module("accel_jsonl.plugin")
    plugins.get_plugin_manager().register(module, name="jsonl")
    _clear_caches()

    def undo() -> None:
        plugins.get_plugin_manager().unregister(name="jsonl")
        _clear_caches()

    return undo


def _clear_caches() -> None:
    from accel.plugins import registry

    registry.clear_cache()


SETUPS = {"accelerator": accelerator, "jsonl_plugin": jsonl_plugin}
