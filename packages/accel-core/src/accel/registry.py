"""Compatibility path: the registry lives in :mod:`accel.plugins.registry`."""

from __future__ import annotations

from accel.plugins.registry import *  # noqa: F403
from accel.plugins.registry import __all__  # noqa: F401
