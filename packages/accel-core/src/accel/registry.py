"""Old path of :mod:`accel.plugins.registry`, kept because docs/plugins.md once showed it to plugin authors."""

from __future__ import annotations

from accel.plugins.registry import *  # noqa: F403
from accel.plugins.registry import __all__  # noqa: F401
