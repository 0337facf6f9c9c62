"""An example third-party accel backend: data parallelism by explicit gradient all-reduce."""

from __future__ import annotations

__all__ = ["AllReduceBackend"]


def __getattr__(name: str):
    """Import the backend (and torch) only when it is asked for."""
    if name == "AllReduceBackend":
        from .backend import AllReduceBackend

        return AllReduceBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
