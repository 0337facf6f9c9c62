"""accel-profiler: ``accelerator.profile()`` over ``torch.profiler``, with per-rank Chrome traces.

``ProfileKwargs`` is also importable as ``accel.ProfileKwargs`` / ``accel.utils.ProfileKwargs``.
Importing this package does not import torch.
"""

from __future__ import annotations

from .kwargs import ACTIVITIES, SCHEDULE_KEYS, ProfileKwargs, ProfilerConfigError
from .profiler import profile, trace_path

__all__ = [
    "ACTIVITIES",
    "SCHEDULE_KEYS",
    "ProfileKwargs",
    "ProfilerConfigError",
    "profile",
    "trace_path",
]
