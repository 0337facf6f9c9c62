"""Entry-point module of accel-ddp: registers the DDP backend. Imports nothing heavy."""

from __future__ import annotations

from accel.hookspecs import hookimpl


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
    """``DistributedDataParallelKwargs``, ``DDPCommunicationHookType`` and ``LocalSGD`` under ``accel``."""
    return {
        name: f"accel_ddp:{name}"
        for name in ("DistributedDataParallelKwargs", "DDPCommunicationHookType", "LocalSGD")
    }
