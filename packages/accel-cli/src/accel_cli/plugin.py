"""Entry-point module of accel-cli: registers its launchers. Imports nothing heavy."""

from __future__ import annotations

from accel.hookspecs import hookimpl


@hookimpl
def accel_launchers() -> list[type]:
    """The single-process launcher and the torch.distributed.run launcher."""
    from .launchers import SimpleLauncher, TorchrunLauncher

    return [SimpleLauncher, TorchrunLauncher]
