"""Entry point of accel-allreduce-example: registers the ``allreduce`` backend. Imports nothing heavy."""

from __future__ import annotations

from accel.hookspecs import hookimpl


@hookimpl
def accel_backends() -> list[type]:
    """The all-reduce backend, selected with ``ACCEL_BACKEND=allreduce``."""
    from .backend import AllReduceBackend

    return [AllReduceBackend]
