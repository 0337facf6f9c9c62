"""The accel-ft launcher: ``accel launch --ft`` runs the script as R replica groups of P processes.

The plan's command is the supervisor, ``python -m accel_ft.supervisor``, run on this machine
like torchrun would be. It starts the lighthouse (or joins the one ``--ft_lighthouse``
names) and one ``torch.distributed.run`` per replica group, each with its own rendezvous
and ``--max_restarts``: a failed group is restarted by its own torchrun and heals from a
live peer while the others keep training. Torch-free: ``accel launch --help`` and the plan
import neither torch nor torchft.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from accel import env_vars as accel_environment
from accel.errors import UsageError
from accel.launchers import Launcher, LaunchPlan

from .config import FT_SECTION

SUPERVISOR_MODULE = "accel_ft.supervisor"
"""Module the plan runs on this machine."""


def ft_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The typed ``ft_config`` values of ``config`` (defaults filled in)."""
    return FT_SECTION.read(config.get("ft_config") or {})


class FTLauncher(Launcher):
    """Replica groups on torchft (``--ft``): each group its own torchrun group with restarts."""

    name = "ft"
    priority = 250

    def claims(self, config: dict[str, Any]) -> bool:
        """``ft_config.use_ft`` (``accel launch --ft``)."""
        return bool(ft_settings(config).get("use_ft"))

    def command(self, config: dict[str, Any], script: list[str]) -> list[str]:
        """``python -m accel_ft.supervisor --script script.py args`` (``--module`` with ``-m``)."""
        if config.get("no_python"):
            raise UsageError("--ft runs Python scripts: drop --no_python")
        target, *args = script
        mode = "--module" if config.get("module") else "--script"
        return [sys.executable, "-m", SUPERVISOR_MODULE, mode, target, *args]

    def plan(
        self, config: dict[str, Any], script: list[str], environment: Mapping[str, str]
    ) -> LaunchPlan:
        """The supervisor command; every group gets ``environment`` plus its own settings."""
        settings = ft_settings(config)
        if int(config.get("num_machines") or 1) > 1:
            raise UsageError(
                "--ft runs the replica groups of this machine: drop --num_machines and start "
                "`accel launch --ft --ft_lighthouse HOST:PORT --ft_first_group N` on each machine"
            )
        if int(config.get("max_restarts") or 0):
            raise UsageError(
                "--max_restarts restarts every process; with --ft each replica group restarts "
                "alone: use --ft_max_restarts N"
            )
        if settings["ft_min_replicas"] > settings["ft_replica_groups"] and not settings.get(
            "ft_lighthouse"
        ):
            raise UsageError(
                f"--ft_min_replicas {settings['ft_min_replicas']} is more than the "
                f"{settings['ft_replica_groups']} replica groups this launch starts: lower it, "
                "or join a lighthouse other machines also use (--ft_lighthouse)"
            )
        groups, size = settings["ft_replica_groups"], settings["ft_group_size"]
        env = dict(environment)
        # each group's state tells NO / MULTI_CPU from its own size, not the launch's
        for name in (
            accel_environment.DISTRIBUTED_TYPE,
            accel_environment.accelerate_name(accel_environment.DISTRIBUTED_TYPE),
        ):
            env.pop(name, None)
        env.setdefault("OMP_NUM_THREADS", "1")
        return LaunchPlan(
            launcher=self.name,
            argv=self.command(config, script),
            environment=env,
            script=list(script),
            num_processes=groups * size,
            num_machines=1,
            nproc_per_node=groups * size,
            machine_rank=0,
            where=f"this machine ({groups} replica groups of {size} processes, torchft)",
        )


__all__ = ["FTLauncher", "SUPERVISOR_MODULE", "ft_settings"]
