"""accel-profiler: ``accelerator.profile()`` over ``torch.profiler``, with per-rank Chrome traces.

``ProfileKwargs`` is also importable as ``accel.ProfileKwargs`` / ``accel.utils.ProfileKwargs``.
Importing this package does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports

if TYPE_CHECKING:  # what type checkers and editors follow; at run time names load on first use
    from accel_profiler.kwargs import ACTIVITIES as ACTIVITIES
    from accel_profiler.kwargs import SCHEDULE_KEYS as SCHEDULE_KEYS
    from accel_profiler.kwargs import ProfileKwargs as ProfileKwargs
    from accel_profiler.kwargs import ProfilerConfigError as ProfilerConfigError
    from accel_profiler.profiler import profile as profile
    from accel_profiler.profiler import trace_path as trace_path

_NAMES = {
    "ACTIVITIES": "accel_profiler.kwargs",
    "SCHEDULE_KEYS": "accel_profiler.kwargs",
    "ProfileKwargs": "accel_profiler.kwargs",
    "ProfilerConfigError": "accel_profiler.kwargs",
    "profile": "accel_profiler.profiler",
    "trace_path": "accel_profiler.profiler",
}
"""Public names and the module defining each, imported on first use."""

__all__ = sorted(_NAMES)

__getattr__, __dir__ = exports(__name__, _NAMES)
