"""Accelerate's module path ``accelerate.local_sgd``: :class:`LocalSGD` comes from accel-ddp.

Loaded on first use; without accel-ddp the import raises an ImportError naming the package
to install.
"""

from __future__ import annotations

from accel.lazy import exports

_NAMES = {"LocalSGD": "accel_ddp.local_sgd"}

__all__ = sorted(_NAMES)

__getattr__, __dir__ = exports(__name__, _NAMES)
