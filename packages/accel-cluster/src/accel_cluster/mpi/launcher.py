"""The MPI launcher: ``distributed_type: MULTI_CPU`` with an MPI host file runs under ``mpirun``.

Open MPI's arguments (``--hostfile F -np N --map-by ppr:P:node``) or MPICH's and
Intel MPI's (``-f F -n N -ppn P``) are chosen from ``mpirun --version`` (or
``mpirun_config.mpirun_flavor``). Each rank runs :mod:`accel_cluster.mpi.worker`,
which turns the MPI rank variables into ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK``.
The main address is ``main_process_ip`` or the first host of the host file.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from functools import lru_cache
from typing import cast

from accel.errors import ConfigError
from accel.launchers import Launcher, LaunchPlan
from accel.launchers.local import threads_environment

from ..launch_settings import MpirunSettings, launch_settings
from .hostfile import KEY, read_hostfile

FLAVORS = ("auto", "openmpi", "mpich")
"""Values of ``mpirun_config.mpirun_flavor`` (``mpich`` also covers Intel MPI and MVAPICH)."""

LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}


def section(config: Mapping[str, object]) -> MpirunSettings:
    """The ``mpirun_config`` section of ``config`` ({} when absent)."""
    return cast("MpirunSettings", dict(launch_settings(config).get("mpirun_config") or {}))


def find_mpirun() -> str:
    """``mpirun`` (else ``mpiexec``) from PATH; ConfigError saying what to install."""
    for name in ("mpirun", "mpiexec"):
        path = shutil.which(name)
        if path:
            return path
    raise ConfigError(
        f"{KEY} is set but neither mpirun nor mpiexec is on PATH: install Open MPI "
        "(apt-get install openmpi-bin) or MPICH / Intel MPI, or remove the host file"
    )


@lru_cache(maxsize=8)
def detect_flavor(program: str) -> str:
    """``openmpi`` or ``mpich`` from ``program --version``."""
    try:
        out = subprocess.run(
            [program, "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(
            f"cannot run `{program} --version` ({exc}); set mpirun_config.mpirun_flavor to "
            "openmpi or mpich"
        ) from None
    text = (out.stdout + out.stderr).lower()
    return "openmpi" if "open mpi" in text or "open-mpi" in text or "openrte" in text else "mpich"


def flavor_of(config: Mapping[str, object], program: str) -> str:
    """The argument style: ``mpirun_config.mpirun_flavor`` unless ``auto``, else detected."""
    flavor = str(section(config).get("mpirun_flavor") or "auto").lower()
    if flavor not in FLAVORS:
        raise ConfigError(
            f"mpirun_config.mpirun_flavor: {flavor!r} is not allowed; use one of {', '.join(FLAVORS)}"
        )
    return detect_flavor(program) if flavor == "auto" else flavor


def processes(config: Mapping[str, object], hosts: int) -> tuple[int, int]:
    """``(total, per_node)`` from num_processes (the total) and num_machines."""
    config = launch_settings(config)
    machines = int(config.get("num_machines") or 1)
    total = int(config.get("num_processes") or 1)
    if machines > hosts:
        raise ConfigError(
            f"num_machines {machines} but the host file {section(config).get('mpirun_hostfile')} "
            f"lists {hosts} host(s); add hosts or lower num_machines"
        )
    per_node = int(config.get("nproc_per_node") or max(1, total // machines))
    return total, per_node


def main_address(config: Mapping[str, object]) -> str:
    """``main_process_ip``, else the first host of the host file (loopback for a local one)."""
    settings = launch_settings(config)
    if settings.get("main_process_ip"):
        return str(settings["main_process_ip"])
    first = read_hostfile(_hostfile(config))[0].name
    return "127.0.0.1" if first in LOCAL_HOSTS else first


def _hostfile(config: Mapping[str, object]) -> str:
    """``mpirun_config.mpirun_hostfile`` of a config the launcher claimed (so it is set)."""
    return cast("str", section(config)["mpirun_hostfile"])


def mpirun_arguments(
    flavor: str, program: str, hostfile: str, total: int, per_node: int
) -> list[str]:
    """The launcher part of the command in ``flavor``'s argument style."""
    if flavor == "openmpi":
        argv = [program, "--hostfile", hostfile, "-np", str(total)]
        argv += ["--map-by", f"ppr:{per_node}:node"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            argv.append("--allow-run-as-root")
        return argv
    return [program, "-f", hostfile, "-n", str(total), "-ppn", str(per_node), "-genvall"]


class MpiLauncher(Launcher):
    """Multi-CPU jobs on the hosts of an MPI host file, started by ``mpirun``."""

    name = "mpirun"
    priority = 50

    def claims(self, config: Mapping[str, object]) -> bool:
        """``distributed_type: MULTI_CPU`` with ``mpirun_config.mpirun_hostfile`` on a local machine."""
        return (
            config.get("compute_environment", "LOCAL_MACHINE") == "LOCAL_MACHINE"
            and config.get("distributed_type") == "MULTI_CPU"
            and bool(section(config).get("mpirun_hostfile"))
        )

    def command(self, config: Mapping[str, object], script: list[str]) -> list[str]:
        """``mpirun ... python -m accel_cluster.mpi.worker --script train.py args``."""
        options = section(config)
        hostfile = options.get("mpirun_hostfile")
        if not hostfile:
            raise ConfigError(
                f"the mpirun launcher needs a host file: pass --mpirun_hostfile or set {KEY}"
            )
        hosts = read_hostfile(hostfile)
        total, per_node = processes(config, len(hosts))
        program = find_mpirun()
        flavor = flavor_of(config, program)
        argv = mpirun_arguments(
            flavor, program, str(os.path.abspath(os.path.expanduser(hostfile))), total, per_node
        )
        argv += shlex.split(str(options.get("mpirun_args") or ""))
        if flavor == "openmpi":
            argv = [sys.executable, "-m", "accel_cluster.mpi.forward", *argv]
        target, *args = script
        if config.get("no_python"):
            return [*argv, target, *args]
        mode = "--module" if config.get("module") else "--script"
        return [*argv, sys.executable, "-m", "accel_cluster.mpi.worker", mode, target, *args]

    def plan(
        self, config: Mapping[str, object], script: list[str], environment: Mapping[str, str]
    ) -> LaunchPlan:
        """The mpirun command; every rank gets ``MASTER_ADDR`` / ``MASTER_PORT``, one thread
        each unless ``num_cpu_threads_per_process`` is set, and ``CCL_WORKER_COUNT``."""
        argv = self.command(config, script)
        env = dict(environment)
        env.update(
            MASTER_ADDR=main_address(config),
            MASTER_PORT=str(launch_settings(config).get("main_process_port") or 29500),
        )
        env.update(threads_environment(config))
        ccl = section(config).get("mpirun_ccl")
        if ccl:
            env["CCL_WORKER_COUNT"] = str(ccl)
        hostfile = _hostfile(config)
        hosts = read_hostfile(hostfile)
        total, per_node = processes(config, len(hosts))
        machines = int(launch_settings(config).get("num_machines") or 1)
        return LaunchPlan(
            launcher=self.name,
            argv=argv,
            environment=env,
            script=list(script),
            num_processes=total,
            num_machines=machines,
            nproc_per_node=per_node,
            machine_rank=None,  # mpirun places the ranks on the hosts
            where=f"the hosts of {hostfile} (mpirun)",
        )


__all__ = [
    "FLAVORS",
    "MpiLauncher",
    "detect_flavor",
    "find_mpirun",
    "flavor_of",
    "main_address",
    "mpirun_arguments",
    "processes",
]
