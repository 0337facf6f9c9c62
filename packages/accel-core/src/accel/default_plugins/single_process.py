"""Default plugin: the single-process backend (``distributed_type: NO``)."""

from __future__ import annotations

from accel.hookspecs import hookimpl


@hookimpl
def accel_backends() -> list[type]:
    """Core's one-process backend."""
    from accel.backends.single import SingleProcessBackend

    return [SingleProcessBackend]
