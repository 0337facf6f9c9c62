"""Entry-point module of accel-ddp: registers the DDP backend. Imports nothing heavy."""

from __future__ import annotations

from accel.hookspecs import hookimpl
from accel.lazy import catalog_exports


@hookimpl
def accel_backends() -> list[type]:
    """The DDP backend, for every multi-process data-parallel distributed type."""
    from .backend import DDPBackend

    return [DDPBackend]


@hookimpl
def accel_env_info() -> dict[str, str]:
    """A line for ``accel env``."""
    return {"DDP backend": "accel-ddp (gloo on CPU, nccl on CUDA)"}


@hookimpl
def accel_exports() -> dict[str, str]:
    """``DistributedDataParallelKwargs``, ``DDPCommunicationHookType`` and ``LocalSGD`` under ``accel``.

    The rows of :data:`accel.catalog.EXPORTS` for this distribution, each served by
    ``accel_ddp``'s lazy names.
    """
    return catalog_exports("accel-ddp", "accel_ddp")
