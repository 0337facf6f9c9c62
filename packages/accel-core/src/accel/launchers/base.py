"""The :class:`Launcher` ABC and the :class:`LaunchPlan` it builds.

A launcher turns the resolved settings of ``accel launch`` (one flat mapping, plugin
sections included) and the script to run into a :class:`LaunchPlan`: the argv to run,
the environment the workers get, and how many processes start on how many machines.
Nothing goes through a shell, and nothing here imports torch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LaunchPlan:
    """What a launcher will run, where, and with which environment.

    ``environment`` holds only the variables the launch sets (the ``ACCEL_*`` settings,
    the plugins' variables and the launcher's own); they are applied over the launching
    process's environment. ``replace_process`` asks the front end to run ``argv`` in
    place of itself (``os.execvpe``) instead of supervising it as a child.
    """

    launcher: str
    """Name of the launcher that built the plan."""
    argv: list[str]
    """The command to run on this machine, as an argv list."""
    environment: dict[str, str] = field(default_factory=dict)
    """Variables set for the command (and so for every worker it starts)."""
    script: list[str] = field(default_factory=list)
    """The training script (path, module or program) and its own arguments."""
    num_processes: int = 1
    """Worker processes over all machines."""
    num_machines: int = 1
    """Machines (nodes) taking part."""
    nproc_per_node: int = 1
    """Worker processes on each machine."""
    machine_rank: int | None = 0
    """Rank of this machine (None when the launcher, a scheduler or a service decides)."""
    where: str = "this machine"
    """Where the workers run, in words (``this machine``, ``SLURM job 42``, ``TPU pod demo``)."""
    replace_process: bool = False
    """Run ``argv`` in place of the launching process (one local process, no supervision)."""

    @classmethod
    def for_config(
        cls,
        launcher: str,
        argv: list[str],
        config: Mapping[str, Any],
        script: list[str],
        environment: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> LaunchPlan:
        """A plan whose process counts come from the resolved ``config`` (``num_processes``, ...)."""
        machines = int(config.get("num_machines") or 1)
        total = int(config.get("num_processes") or 1)
        per_node = int(config.get("nproc_per_node") or max(1, total // machines))
        rank = config.get("machine_rank")
        values: dict[str, Any] = {
            "num_processes": total,
            "num_machines": machines,
            "nproc_per_node": per_node,
            "machine_rank": int(rank) if rank is not None else 0,
        }
        values.update(overrides)
        return cls(
            launcher=launcher,
            argv=list(argv),
            environment=dict(environment or {}),
            script=list(script),
            **values,
        )

    def to_dict(self) -> dict[str, object]:
        """A JSON-friendly dict of the plan."""
        return {
            "launcher": self.launcher,
            "argv": list(self.argv),
            "environment": dict(self.environment),
            "script": list(self.script),
            "num_processes": self.num_processes,
            "num_machines": self.num_machines,
            "nproc_per_node": self.nproc_per_node,
            "machine_rank": self.machine_rank,
            "where": self.where,
            "replace_process": self.replace_process,
        }


class Launcher(ABC):
    """Starts a job for a resolved configuration; registered through ``accel_launchers``.

    Launchers are asked in priority order (highest first); the first whose
    :meth:`claims` returns True builds the :class:`LaunchPlan` (``--launcher NAME``
    forces one). A simple launcher implements :meth:`command`; one that sets variables
    of its own or knows better where the processes run overrides :meth:`plan`.
    """

    name: str = ""
    """Name shown by ``accel plugins`` and accepted by ``accel launch --launcher``."""
    priority: int = 0
    """Higher is asked first (a SLURM launcher outranks the local one)."""

    @abstractmethod
    def claims(self, config: dict[str, Any]) -> bool:
        """Whether this launcher handles ``config`` (the merged settings of ``accel launch``)."""

    def command(self, config: dict[str, Any], script: list[str]) -> list[str]:
        """The argv that runs ``script`` (script path and its arguments) under ``config``."""
        raise NotImplementedError(
            f"launcher {self.name or type(self).__name__} implements neither command() nor plan()"
        )

    def plan(
        self, config: dict[str, Any], script: list[str], environment: Mapping[str, str]
    ) -> LaunchPlan:
        """The :class:`LaunchPlan` for ``script`` under ``config``.

        ``environment`` is what every worker gets whatever the launcher: the ``ACCEL_*``
        settings and the variables plugins return from ``accel_launch_environment``. The
        plan's environment starts from it; a launcher adds (or overrides) the variables
        that depend on how it starts the processes. The default runs :meth:`command`
        with ``environment`` unchanged.
        """
        return LaunchPlan.for_config(
            self.name, self.command(config, script), config, script, environment
        )

    def claims_notebook(self) -> bool:
        """Whether :func:`~accel.notebook_launcher` runs through :meth:`notebook_launch` here (a TPU...)."""
        return False

    def notebook_launch(
        self,
        function: Callable[..., object],
        args: tuple[object, ...],
        num_processes: int | None,
        mixed_precision: str,
    ) -> object:
        """Run ``function(*args)`` on ``num_processes`` workers from a notebook (if it claims it)."""
        raise NotImplementedError


__all__ = ["LaunchPlan", "Launcher"]
