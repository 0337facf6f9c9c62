"""The :class:`Launcher` ABC: how ``accel launch`` starts a job for a configuration."""

from __future__ import annotations

from typing import Any


class Launcher:
    """Turns a resolved launch configuration into a command and environment.

    Launchers are asked in priority order (highest first); the first whose
    :meth:`claims` returns True builds the command. Commands are argv lists:
    nothing goes through a shell.
    """

    name: str = ""
    """Name shown by ``accel plugins`` and accepted by ``accel launch --launcher``."""
    priority: int = 0
    """Higher is asked first (a SLURM launcher outranks the local one)."""

    def claims(self, config: dict[str, Any]) -> bool:
        """Whether this launcher handles ``config`` (the merged settings of ``accel launch``)."""
        raise NotImplementedError

    def command(self, config: dict[str, Any], script: list[str]) -> list[str]:
        """The argv that runs ``script`` (script path and its arguments) under ``config``."""
        raise NotImplementedError

    def environment(self, config: dict[str, Any]) -> dict[str, str]:
        """Extra environment variables (``ACCEL_*``) for the workers."""
        return {}

    def claims_notebook(self) -> bool:
        """Whether :func:`~accel.notebook_launcher` runs through :meth:`notebook_launch` here (a TPU...)."""
        return False

    def notebook_launch(
        self, function: Any, args: tuple, num_processes: int | None, mixed_precision: str
    ) -> Any:
        """Run ``function(*args)`` on ``num_processes`` workers from a notebook (if it claims it)."""
        raise NotImplementedError


__all__ = ["Launcher"]
