"""The SLURM launcher: one ``srun accel launch ...`` command for every node of an allocation.

Two ways to use it, chosen by ``slurm_config.slurm_mode`` (``auto`` by default):

* ``node``: one SLURM task per node (``srun --ntasks-per-node=1``); each task runs
  ``torch.distributed.run`` for the node's processes, with the node rank, node count
  and main address taken from SLURM.
* ``task``: one SLURM task per process (``srun --ntasks-per-node=N``); each task is
  one worker, with ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` taken from SLURM.

``auto`` picks ``node`` when there is one task per node and ``task`` otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from accel.errors import ConfigError
from accel.launchers import Launcher, LaunchPlan
from accel.launchers.local import TorchrunLauncher, threads_environment, worker_command

from ..launch_settings import launch_settings
from .config import MODES
from .environment import SlurmTask, in_allocation, read_task


def slurm_mode(config: Mapping[str, object]) -> str:
    """The configured mode (``auto`` when unset)."""
    section = launch_settings(config).get("slurm_config") or {}
    mode = str(section.get("slurm_mode") or "auto").lower()
    if mode not in MODES:
        raise ConfigError(
            f"slurm_config.slurm_mode: {mode!r} is not allowed; use one of {', '.join(MODES)}"
        )
    return mode


def choose_mode(config: Mapping[str, object], task: SlurmTask) -> str:
    """``node`` or ``task`` for this step; rejects a step whose tasks would share node ranks."""
    mode = slurm_mode(config)
    if mode in ("auto", "off"):
        return "node" if task.world_size == task.num_nodes else "task"
    if mode == "node" and task.world_size != task.num_nodes:
        raise ConfigError(
            f"slurm_mode node: {task.world_size} SLURM tasks on {task.num_nodes} node(s) would give "
            f"node rank {task.node_rank} to several tasks (duplicate node ranks); run one task per "
            "node (srun --ntasks-per-node=1) or use --slurm_mode task"
        )
    return mode


def node_processes(config: Mapping[str, object], task: SlurmTask) -> int:
    """Processes per node in ``node`` mode, from ``num_processes`` (the total) or ``nproc_per_node``."""
    config = launch_settings(config)
    machines = int(config.get("num_machines") or 1)
    total = int(config.get("num_processes") or 1)
    if machines == task.num_nodes:
        return int(config.get("nproc_per_node") or max(1, total // machines))
    if machines != 1:
        raise ConfigError(
            f"num_machines {machines} disagrees with the SLURM allocation of {task.num_nodes} "
            "node(s); drop num_machines (SLURM decides) or allocate that many nodes"
        )
    if total <= task.num_nodes:
        return 1
    if total % task.num_nodes:
        raise ConfigError(
            f"num_processes {total} (the total over all machines) is not divisible by the "
            f"{task.num_nodes} SLURM nodes; pass --nproc_per_node for each node instead"
        )
    return total // task.num_nodes


class SlurmLauncher(Launcher):
    """Runs the job across a SLURM allocation from one ``srun accel launch`` command."""

    name = "slurm"
    priority = 100

    def claims(self, config: Mapping[str, object]) -> bool:
        """Inside an ``srun`` step of several tasks or nodes (or with an explicit slurm_mode)."""
        if config.get("compute_environment", "LOCAL_MACHINE") != "LOCAL_MACHINE":
            return False
        mode = slurm_mode(config)
        if mode == "off" or not in_allocation():
            return False
        task = read_task()
        return mode != "auto" or task.world_size > 1 or task.num_nodes > 1

    def _address(self, config: Mapping[str, object], task: SlurmTask) -> tuple[str, int]:
        settings = launch_settings(config)
        ip = settings.get("main_process_ip") or task.main_address
        port = int(settings.get("main_process_port") or task.default_port())
        return str(ip), port

    def _node_config(self, config: Mapping[str, object], task: SlurmTask) -> dict[str, object]:
        ip, port = self._address(config, task)
        return {
            **config,
            "num_machines": task.num_nodes,
            "machine_rank": task.node_rank,
            "nproc_per_node": node_processes(config, task),
            "main_process_ip": ip,
            "main_process_port": port,
        }

    def command(self, config: Mapping[str, object], script: list[str]) -> list[str]:
        """``torch.distributed.run`` for this node (node mode) or the worker itself (task mode)."""
        return self.plan(config, script, {}).argv

    def plan(
        self, config: Mapping[str, object], script: list[str], environment: Mapping[str, str]
    ) -> LaunchPlan:
        """Node mode: core's torchrun plan for this node. Task mode: this task is one worker.

        In task mode the plan's environment adds this task's torch.distributed variables
        (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ...) and one thread per
        process unless ``num_cpu_threads_per_process`` is set.
        """
        task = read_task()
        where = (
            f"SLURM job {task.job_id} ({task.num_nodes} node{'s' if task.num_nodes > 1 else ''})"
        )
        if choose_mode(config, task) == "node":
            node = TorchrunLauncher().plan(self._node_config(config, task), script, environment)
            node.launcher, node.where = self.name, where
            node.num_processes = node.nproc_per_node * task.num_nodes
            return node
        ip, port = self._address(config, task)
        env = {**environment, **threads_environment(config)}
        env.update(
            RANK=str(task.rank),
            WORLD_SIZE=str(task.world_size),
            LOCAL_RANK=str(task.local_rank),
            LOCAL_WORLD_SIZE=str(task.local_world_size),
            GROUP_RANK=str(task.node_rank),
            NODE_RANK=str(task.node_rank),
            MASTER_ADDR=ip,
            MASTER_PORT=str(port),
        )
        return LaunchPlan(
            launcher=self.name,
            argv=worker_command(config, script),
            environment=env,
            script=list(script),
            num_processes=task.world_size,
            num_machines=task.num_nodes,
            nproc_per_node=task.local_world_size,
            machine_rank=task.node_rank,
            where=where,
        )


def describe() -> str:
    """One line for ``accel env``: this process's SLURM task, or that there is none."""
    if not in_allocation():
        return "not inside a SLURM step"
    try:
        task = read_task()
    except ConfigError as exc:
        return f"inconsistent SLURM environment: {exc}"
    return (
        f"job {task.job_id}: task {task.rank}/{task.world_size}, node {task.node_rank}/"
        f"{task.num_nodes} ({', '.join(task.hosts[:4])}{', ...' if task.num_nodes > 4 else ''}); "
        f"host {os.uname().nodename}"
    )


__all__ = ["MODES", "SlurmLauncher", "choose_mode", "describe", "node_processes", "slurm_mode"]
