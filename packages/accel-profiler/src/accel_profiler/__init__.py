"""accel-profiler: ``accelerator.profile()`` over ``torch.profiler``, with per-rank Chrome traces.

``ProfileKwargs`` is also importable as ``accel.ProfileKwargs`` / ``accel.utils.ProfileKwargs``.
Importing this package does not import torch.
"""

from __future__ import annotations

from accel.forwarding import module_attributes

_NAMES = {
    **dict.fromkeys(
        ("ACTIVITIES", "SCHEDULE_KEYS", "ProfileKwargs", "ProfilerConfigError"), "kwargs"
    ),
    **dict.fromkeys(("profile", "trace_path"), "profiler"),
}
"""Public names and their module, loaded on first use."""

__all__ = sorted(_NAMES)


__getattr__ = module_attributes(__name__, _NAMES)
