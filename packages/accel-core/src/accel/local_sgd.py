"""Accelerate's module path ``accelerate.local_sgd``: :class:`LocalSGD` comes from accel-ddp.

Resolved on first use through the plugins' ``accel_exports`` hook; without accel-ddp
the import raises an ImportError naming the package to install.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "LocalSGD":
        from accel._lazy import resolve

        return resolve(name)
    raise AttributeError(f"module 'accel.local_sgd' has no attribute {name!r}")


def __dir__() -> list[str]:
    return ["LocalSGD"]
