"""Default plugin: the ``simple`` (one process) and ``torchrun`` (torch.distributed.run) launchers."""

from __future__ import annotations

from ..hookspecs import hookimpl


@hookimpl
def accel_launchers() -> list[type]:
    """Core's local launchers (see :mod:`accel.launchers.local`)."""
    from ..launchers.local import SimpleLauncher, TorchrunLauncher

    return [SimpleLauncher, TorchrunLauncher]
