"""The Ray launcher: ``accel launch --ray`` runs the script as a Ray Train job.

The plan's command is the driver, ``python -m accel_ray.driver``, run (and supervised)
on the launching machine like torchrun would be: it connects to the Ray cluster, starts
one Ray Train worker per process and waits for them. The variables every worker gets
(the ``ACCEL_*`` settings and the plugins' variables) travel to the workers as one JSON
variable, :data:`WORKER_ENV`, which the driver turns into the job's runtime environment.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import SupportsInt, cast

from accel.catalog import DATA_PARALLEL_TYPES
from accel.config.core_options import KEYS
from accel.config.options import Option
from accel.errors import UsageError
from accel.launchers import Launcher, LaunchPlan

from .config import RAY_SECTION, RaySettings

WORKER_ENV = "ACCEL_RAY_WORKER_ENV"
WORKER_ENVIRONMENT = Option("ray_worker_env", env=WORKER_ENV, flag=None, in_file=False)
"""The declaration the driver reads :data:`WORKER_ENV` (JSON) through."""
"""JSON of the variables the plan gives every worker (read by :mod:`accel_ray.driver`)."""
DRIVER_MODULE = "accel_ray.driver"
"""Module the plan runs on the launching machine."""


def ray_settings(config: Mapping[str, object]) -> RaySettings:
    """The typed ``ray_config`` values of ``config`` (defaults filled in)."""
    section = cast("Mapping[str, object] | None", config.get("ray_config"))
    return cast("RaySettings", RAY_SECTION.read(section or {}))


def _number(config: Mapping[str, object], key: str, default: int) -> int:
    """The resolved setting ``key`` as an int (``default`` when unset or 0)."""
    return int(cast("SupportsInt | str", config.get(key) or default))


def num_workers(config: Mapping[str, object]) -> int | tuple[int, int]:
    """``ray_num_workers`` (a number, or an elastic ``(min, max)`` range), else ``num_processes``."""
    workers = ray_settings(config).get("ray_num_workers")
    return workers if workers else _number(config, "num_processes", 1)


def describe_workers(workers: int | tuple[int, int]) -> str:
    """``2 Ray Train workers`` or ``1 to 4 Ray Train workers (elastic)``."""
    if isinstance(workers, tuple):
        return f"{workers[0]} to {workers[1]} Ray Train workers (elastic)"
    return f"{workers} Ray Train workers"


SIZED_TYPES = ("NO", *DATA_PARALLEL_TYPES)
"""Distributed types that only say "one process" or "data parallel": with another number of
workers than ``num_processes`` (or a range) each worker's state tells it from its group."""


RAY_CLIENT_PORT = 10001
"""Port of a ``ray://host`` address that names none (Ray Client's default)."""


def check_reachable(address: str, timeout: float = 5.0, given_as: str = "--ray_address") -> None:
    """A ``host:port`` or ``ray://host[:port]`` address must accept connections.

    Ray itself retries an unreachable cluster (for half a minute through Ray Client, for
    minutes through the GCS); this says so at once. Other values (``auto``, a cluster
    name) are left to Ray.
    """
    scheme, _, rest = address.rpartition("://")
    if scheme not in ("", "ray"):
        return
    host, sep, port = rest.rpartition(":")
    if not sep and scheme == "ray":
        host, port = rest, str(RAY_CLIENT_PORT)
    if not host or not port.isdigit():
        return
    import socket

    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise UsageError(
            f"{given_as} {address}: no Ray cluster answers there ({exc.strerror or exc}); "
            "start one with `ray start --head` (Ray Client listens on port 10001) "
            "or fix the address"
        ) from None


class RayLauncher(Launcher):
    """Runs the script on a Ray cluster, one Ray Train worker per process (``--ray``)."""

    name = "ray"
    priority = 200

    def claims(self, config: Mapping[str, object]) -> bool:
        """``ray_config.use_ray`` (``accel launch --ray``)."""
        return bool(ray_settings(config).get("use_ray"))

    def command(self, config: Mapping[str, object], script: list[str]) -> list[str]:
        """``python -m accel_ray.driver --script script.py args`` (``--module`` with ``-m``)."""
        if config.get("no_python"):
            raise UsageError(
                "--ray runs Python scripts in Ray Train workers: drop --no_python "
                "(or launch the program without --ray)"
            )
        target, *args = script
        mode = "--module" if config.get("module") else "--script"
        return [sys.executable, "-m", DRIVER_MODULE, mode, target, *args]

    def plan(
        self, config: Mapping[str, object], script: list[str], environment: Mapping[str, str]
    ) -> LaunchPlan:
        """The driver command; the workers' variables ride along in :data:`WORKER_ENV`."""
        settings = ray_settings(config)
        workers = num_workers(config)
        most = workers[1] if isinstance(workers, tuple) else workers
        if _number(config, "max_restarts", 0):
            raise UsageError(
                "--max_restarts restarts torchrun's workers; with --ray, Ray restarts them: "
                "use --ray_max_failures N"
            )
        if _number(config, "num_machines", 1) > 1:
            raise UsageError(
                "--ray places the workers on the Ray cluster's nodes itself: drop "
                "--num_machines (--num_processes or --ray_num_workers is the total)"
            )
        given = settings.get("ray_address")
        if given:
            check_reachable(given)
        elif os.environ.get("RAY_ADDRESS"):
            check_reachable(os.environ["RAY_ADDRESS"], given_as="RAY_ADDRESS")
        address = settings.get("ray_address") or os.environ.get("RAY_ADDRESS")
        cluster = f"the Ray cluster at {address}" if address else "a new local Ray instance"
        env = dict(environment)
        env[WORKER_ENV] = json.dumps(self.worker_environment(config, environment), sort_keys=True)
        return LaunchPlan(
            launcher=self.name,
            argv=self.command(config, script),
            environment=env,
            script=list(script),
            num_processes=most,
            num_machines=1,
            nproc_per_node=most,
            machine_rank=None,  # Ray places the workers
            where=f"{cluster} ({describe_workers(workers)})",
        )

    @staticmethod
    def worker_environment(
        config: Mapping[str, object], environment: Mapping[str, str]
    ) -> dict[str, str]:
        """The variables every worker gets: the plan's, without a distributed type resolved
        for ``num_processes`` when the group's size is another (or changes: a range)."""
        workers = num_workers(config)
        env = dict(environment)
        option = KEYS["distributed_type"]
        if workers != _number(config, "num_processes", 1) and option.from_env(env) in SIZED_TYPES:
            # the state tells NO / MULTI_* from its world size and device
            for name in option.env_names:
                env.pop(name, None)
        return env


__all__ = [
    "DRIVER_MODULE",
    "RAY_CLIENT_PORT",
    "RayLauncher",
    "WORKER_ENV",
    "check_reachable",
    "describe_workers",
    "num_workers",
    "ray_settings",
]
