"""Who this task is inside a SLURM allocation: read and checked from SLURM's variables.

``srun`` gives every task ``SLURM_PROCID`` (its rank), ``SLURM_NTASKS`` (how many),
``SLURM_NODEID`` (its node's rank), ``SLURM_LOCALID`` (its rank on the node) and the
node list (``SLURM_STEP_NODELIST`` / ``SLURM_JOB_NODELIST``); the first node hosts
the main process. Variables of the job step are preferred to those of the job.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, overload

from accel.errors import ConfigError

from .nodelist import expand_nodelist

NOT_IN_ALLOCATION = (
    "not inside a SLURM allocation (SLURM_JOB_ID is not set): run `srun accel launch ...` "
    "from an sbatch script or an salloc shell, or choose another launcher"
)


def _first(env: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    for name in names:
        value = env.get(name)
        if value not in (None, ""):
            return name, value
    return None


@overload
def _int(env: Mapping[str, str], *names: str) -> int: ...
@overload
def _int(env: Mapping[str, str], *names: str, required: Literal[True]) -> int: ...
@overload
def _int(env: Mapping[str, str], *names: str, required: bool) -> int | None: ...
def _int(env: Mapping[str, str], *names: str, required: bool = True) -> int | None:
    found = _first(env, *names)
    if found is None:
        if not required:
            return None
        raise ConfigError(
            f"{names[0]} is not set: start accel launch with srun inside the allocation "
            "(e.g. `srun --ntasks-per-node=1 accel launch train.py`)"
        )
    name, value = found
    try:
        number = int(value.strip())
    except ValueError:
        raise ConfigError(
            f"{name}={value!r} is not a whole number; is this a SLURM task?"
        ) from None
    if number < 0:
        raise ConfigError(f"{name}={value!r} is negative; is this a SLURM task?")
    return number


def tasks_per_node(text: str, where: str = "SLURM_TASKS_PER_NODE") -> list[int]:
    """Expand SLURM's compressed per-node task counts: ``"2(x3),1"`` -> ``[2, 2, 2, 1]``."""
    counts: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not match:
            raise ConfigError(f"{where}={text!r}: cannot read {part!r}; expected N or N(xM)")
        counts.extend([int(match.group(1))] * int(match.group(2) or 1))
    return counts


@dataclass(frozen=True)
class SlurmTask:
    """This task's place in the job step."""

    job_id: str
    rank: int
    """Global rank of this task (``SLURM_PROCID``)."""
    world_size: int
    """Number of tasks (``SLURM_NTASKS``)."""
    node_rank: int
    """Rank of this task's node (``SLURM_NODEID``)."""
    num_nodes: int
    local_rank: int
    """Rank of this task on its node (``SLURM_LOCALID``)."""
    local_world_size: int
    """Tasks on this task's node."""
    hosts: tuple[str, ...]
    """Every node of the step, in node-rank order."""

    @property
    def main_address(self) -> str:
        """The host of node rank 0, where the main process runs."""
        return self.hosts[0]

    def default_port(self) -> int:
        """A port derived from the job id (20000-29999), so jobs sharing a node do not collide."""
        digits = re.sub(r"\D", "", self.job_id) or "0"
        return 20000 + int(digits) % 10000


def in_allocation(env: Mapping[str, str] | None = None) -> bool:
    """Whether this process runs inside a SLURM job step (``SLURM_JOB_ID`` and ``SLURM_PROCID`` set)."""
    env = os.environ if env is None else env
    return bool(env.get("SLURM_JOB_ID")) and bool(env.get("SLURM_PROCID"))


def read_task(env: Mapping[str, str] | None = None) -> SlurmTask:
    """This task's :class:`SlurmTask`; ConfigError naming the variable when it is missing or inconsistent."""
    env = os.environ if env is None else env
    job_id = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    if not job_id:
        raise ConfigError(NOT_IN_ALLOCATION)
    rank = _int(env, "SLURM_PROCID")
    world = _int(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS")
    node_rank = _int(env, "SLURM_NODEID")
    local_rank = _int(env, "SLURM_LOCALID", required=False)
    found = _first(env, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
    if found is None:
        raise ConfigError("SLURM_JOB_NODELIST is not set: start accel launch with srun")
    where, text = found
    hosts = expand_nodelist(text, where)
    nodes = _int(env, "SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", required=False)
    if nodes is not None and nodes != len(hosts):
        raise ConfigError(
            f"{where}={text!r} names {len(hosts)} node(s) but SLURM_NNODES is {nodes}; "
            "the SLURM environment is inconsistent"
        )
    if rank >= world:
        raise ConfigError(f"SLURM_PROCID {rank} is not below SLURM_NTASKS {world}")
    if node_rank >= len(hosts):
        raise ConfigError(
            f"SLURM_NODEID {node_rank} is not below the {len(hosts)} node(s) of {where}={text!r}"
        )
    me = env.get("SLURMD_NODENAME")
    if me and me in hosts and hosts.index(me) != node_rank:
        raise ConfigError(
            f"SLURMD_NODENAME {me} is node {hosts.index(me)} of {where} but SLURM_NODEID is "
            f"{node_rank}: two nodes would share a node rank"
        )
    counts_text = _first(env, "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
    if counts_text is not None:
        counts = tasks_per_node(counts_text[1], counts_text[0])
        local_world = counts[node_rank] if node_rank < len(counts) else 1
    else:
        local_world = max(1, world // len(hosts))
    if local_rank is None:
        local_rank = rank % local_world
    return SlurmTask(
        job_id=job_id,
        rank=rank,
        world_size=world,
        node_rank=node_rank,
        num_nodes=len(hosts),
        local_rank=local_rank,
        local_world_size=local_world,
        hosts=tuple(hosts),
    )


__all__ = ["NOT_IN_ALLOCATION", "SlurmTask", "in_allocation", "read_task", "tasks_per_node"]
