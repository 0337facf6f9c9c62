"""accel-profiler: ``accelerator.profile()`` over ``torch.profiler``, with per-rank Chrome traces.

``ProfileKwargs`` is also importable as ``accel.ProfileKwargs`` / ``accel.utils.ProfileKwargs``.
Importing this package does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    **dict.fromkeys(
        ("ACTIVITIES", "SCHEDULE_KEYS", "ProfileKwargs", "ProfilerConfigError"), "kwargs"
    ),
    **dict.fromkeys(("profile", "trace_path"), "profiler"),
}
"""Public names and their module, loaded on first use."""

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
