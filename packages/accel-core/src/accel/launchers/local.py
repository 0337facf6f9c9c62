"""Core's local launchers: one process run directly, several through ``torch.distributed.run``.

Both are :class:`~accel.launchers.Launcher` subclasses registered as a default plugin
(:mod:`accel.default_plugins.local_launchers`). They build argv lists only; nothing goes
through a shell. Importing this module does not import torch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from .base import Launcher, LaunchPlan

UNSHARED_STORE = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
"""torchelastic's switch: each c10d rendezvous round's workers get a store of their own."""

WORKER_MODULE = "accel.launchers.worker"
"""Module each worker runs first: it runs the script and reports a failure's rank and traceback."""


def python_command(config: Mapping[str, object], script: list[str]) -> list[str]:
    """``python script.py args`` (or ``python -m module``, or the program itself with ``no_python``)."""
    target, *args = script
    if config.get("no_python"):
        return [target, *args]
    if config.get("module"):
        return [sys.executable, "-m", target, *args]
    return [sys.executable, target, *args]


def worker_command(config: Mapping[str, object], script: list[str]) -> list[str]:
    """``python -m accel.launchers.worker --script script.py args`` (the program itself with ``no_python``).

    For launchers whose scheduler starts each worker process itself (SLURM tasks, ...).
    """
    target, *args = script
    if config.get("no_python"):
        return [target, *args]
    mode = "--module" if config.get("module") else "--script"
    return [sys.executable, "-m", WORKER_MODULE, mode, target, *args]


def threads_environment(config: Mapping[str, object]) -> dict[str, str]:
    """``OMP_NUM_THREADS=1`` unless ``num_cpu_threads_per_process`` sets it (as torchrun does)."""
    return {} if config.get("num_cpu_threads_per_process") else {"OMP_NUM_THREADS": "1"}


class SimpleLauncher(Launcher):
    """One process on this machine: the script runs directly, with the ``ACCEL_*`` variables set."""

    name = "simple"
    priority = 10

    def claims(self, config: dict[str, Any]) -> bool:
        """One process, one machine (not a MIN:MAX range of them), no restarts."""
        return (
            config.get("compute_environment", "LOCAL_MACHINE") == "LOCAL_MACHINE"
            and int(config.get("num_machines") or 1) == 1
            and int(config.get("max_num_machines") or 1) == 1
            and int(config.get("nproc_per_node") or 1) == 1
            and int(config.get("max_restarts") or 0) == 0
        )

    def command(self, config: dict[str, Any], script: list[str]) -> list[str]:
        """``python script.py args`` (or ``python -m module``, or the program itself)."""
        return python_command(config, script)

    def plan(
        self, config: dict[str, Any], script: list[str], environment: Mapping[str, str]
    ) -> LaunchPlan:
        """One process that replaces the launching one (``os.execvpe``)."""
        return LaunchPlan.for_config(
            self.name,
            self.command(config, script),
            config,
            script,
            environment,
            num_processes=1,
            num_machines=1,
            nproc_per_node=1,
            replace_process=True,
        )


class TorchrunLauncher(Launcher):
    """Several processes or machines: ``python -m torch.distributed.run`` (torchelastic).

    Rendezvous, restarts (``--max_restarts``) and failure propagation are torchelastic's.
    On one machine without ``main_process_port`` a free port is chosen (``--standalone``).
    """

    name = "torchrun"
    priority = 0

    def claims(self, config: dict[str, object]) -> bool:
        """Any local-machine job."""
        return config.get("compute_environment", "LOCAL_MACHINE") == "LOCAL_MACHINE"

    def command(self, config: dict[str, Any], script: list[str]) -> list[str]:
        """The ``torch.distributed.run`` argv for ``config``."""
        machines = int(config.get("num_machines") or 1)
        nproc = int(config.get("nproc_per_node") or 1)
        port = config.get("main_process_port")
        ip = config.get("main_process_ip")
        backend = config.get("rdzv_backend") or "static"
        argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc)]
        nnodes = str(machines)
        if config.get("max_num_machines"):
            nnodes = f"{machines}:{int(config['max_num_machines'])}"
        standalone = machines == 1 and port is None and backend == "static"
        if standalone:
            argv.append("--standalone")
        else:
            ip = ip or "127.0.0.1"
            port = int(port or 29500)
            argv += ["--nnodes", nnodes]
            if backend == "static":
                argv += [
                    "--node_rank",
                    str(config.get("machine_rank") or 0),
                    "--master_addr",
                    str(ip),
                    "--master_port",
                    str(port),
                ]
            else:
                argv += [
                    "--rdzv_backend",
                    backend,
                    "--rdzv_endpoint",
                    f"{ip}:{port}",
                    "--rdzv_id",
                    str(config.get("rdzv_id") or "accel"),
                ]
                if config.get("machine_rank") is not None:
                    argv += ["--node_rank", str(config["machine_rank"])]
        if config.get("rdzv_conf"):
            argv += ["--rdzv_conf", str(config["rdzv_conf"])]
        argv += ["--max_restarts", str(int(config.get("max_restarts") or 0))]
        if standalone:
            # torchrun takes an unnamed --nnodes from PET_NNODES: in a Kubeflow pod ("1:2",
            # "2") a standalone agent would wait for nodes that never come
            argv += ["--nnodes", "1"]
        if config.get("monitor_interval") is not None:
            argv += ["--monitor_interval", str(config["monitor_interval"])]
        if config.get("log_dir"):
            argv += ["--log_dir", str(config["log_dir"])]
        if config.get("tee") is not None:
            argv += ["--tee", str(config["tee"])]
        target, *args = script
        if config.get("no_python"):
            return [*argv, "--no_python", target, *args]
        mode = "--module" if config.get("module") else "--script"
        return [*argv, "--module", WORKER_MODULE, mode, target, *args]

    def plan(
        self, config: dict[str, Any], script: list[str], environment: Mapping[str, str]
    ) -> LaunchPlan:
        """The torchrun command; ``OMP_NUM_THREADS`` of 1 unless set, as torchrun would (quietly).

        With a dynamic rendezvous (c10d, ``--nnodes MIN:MAX``) the agent gets
        ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` unless the environment sets it: with the
        agent's store shared (torch's default), a node that joins a running group waits
        forever for the store address that rank 0's agent published only in its first round,
        and the workers' restart counts, which key each attempt's store entries, differ
        between a new node and the old ones.
        """
        env = {**environment, **threads_environment(config)}
        rank = config.get("machine_rank")
        c10d = (config.get("rdzv_backend") or "static") != "static"
        if c10d and UNSHARED_STORE not in os.environ:
            env[UNSHARED_STORE] = "1"
        return LaunchPlan.for_config(
            self.name,
            self.command(config, script),
            config,
            script,
            env,
            # a c10d rendezvous without --node_rank lets torchelastic assign the ranks
            machine_rank=None if rank is None and c10d else int(rank or 0),
        )


__all__ = [
    "SimpleLauncher",
    "TorchrunLauncher",
    "WORKER_MODULE",
    "python_command",
    "threads_environment",
    "worker_command",
]
