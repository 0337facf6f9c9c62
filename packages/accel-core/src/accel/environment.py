"""The ``ACCEL_*`` environment variables: their names and parsing, in one place.

Everything the launcher decides reaches the worker processes as environment
variables. Nothing else in accel reads ``os.environ`` for an ``ACCEL_*`` name.
"""

from __future__ import annotations

import os

MIXED_PRECISION = "ACCEL_MIXED_PRECISION"
"""``no`` / ``fp16`` / ``bf16`` / ``fp8``: the precision chosen by ``accel launch``."""
DISTRIBUTED_TYPE = "ACCEL_DISTRIBUTED_TYPE"
"""The distributed type (``MULTI_CPU``, ``FSDP``, ...) chosen by ``accel launch``."""
BACKEND = "ACCEL_BACKEND"
"""Name of the backend plugin to use, overriding the choice made from the distributed type."""
USE_CPU = "ACCEL_USE_CPU"
"""Force the CPU even when an accelerator is present."""
TORCH_DEVICE = "ACCEL_TORCH_DEVICE"
"""Force the device (``cuda:1``, ``cpu``, ...): Accelerate's ``ACCELERATE_TORCH_DEVICE``."""
DEBUG_MODE = "ACCEL_DEBUG_MODE"
"""Check shapes across ranks before each collective."""
GRADIENT_ACCUMULATION_STEPS = "ACCEL_GRADIENT_ACCUMULATION_STEPS"
"""Default number of gradient-accumulation steps."""
DYNAMO_BACKEND = "ACCEL_DYNAMO_BACKEND"
"""torch.compile backend (``inductor``, ``no``, ...)."""
DYNAMO_MODE = "ACCEL_DYNAMO_MODE"
"""torch.compile mode."""
DYNAMO_USE_FULLGRAPH = "ACCEL_DYNAMO_USE_FULLGRAPH"
"""torch.compile ``fullgraph``."""
DYNAMO_USE_DYNAMIC = "ACCEL_DYNAMO_USE_DYNAMIC"
"""torch.compile ``dynamic``."""
DYNAMO_USE_REGIONAL_COMPILATION = "ACCEL_DYNAMO_USE_REGIONAL_COMPILATION"
"""Compile repeated blocks one by one instead of the whole model."""
PLUGINS = "ACCEL_PLUGINS"
"""Comma-separated allow-list of entry-point plugin names to load (empty: none)."""
DISABLE_PLUGINS = "ACCEL_DISABLE_PLUGINS"
"""Comma-separated list of entry-point plugin names not to load."""
CONFIG_DIR = "ACCEL_CONFIG_DIR"
"""Directory holding ``default_config.yaml``."""
LOG_LEVEL = "ACCEL_LOG_LEVEL"
"""Level of the loggers made by :func:`accel.logging.get_logger`."""
TIMEOUT = "ACCEL_TIMEOUT"
"""Seconds every collective waits before failing (default 1800)."""

# -- settings of `accel launch` (the environment layer of accel.utils.config) --
CONFIG_FILE = "ACCEL_CONFIG_FILE"
"""Config file ``accel launch`` reads when ``--config_file`` is not given."""
NUM_PROCESSES = "ACCEL_NUM_PROCESSES"
"""Total number of processes over all machines (``num_processes``)."""
NUM_MACHINES = "ACCEL_NUM_MACHINES"
"""Number of machines (``num_machines``)."""
MACHINE_RANK = "ACCEL_MACHINE_RANK"
"""Rank of this machine (``machine_rank``): e.g. ``ACCEL_MACHINE_RANK=$SLURM_NODEID``."""
MAIN_PROCESS_IP = "ACCEL_MAIN_PROCESS_IP"
"""Address of the machine of rank 0 (``main_process_ip``)."""
MAIN_PROCESS_PORT = "ACCEL_MAIN_PROCESS_PORT"
"""Port of the main process (``main_process_port``)."""
GPU_IDS = "ACCEL_GPU_IDS"
"""GPUs to use (``gpu_ids``): ``all`` or ``0,1``."""
RDZV_BACKEND = "ACCEL_RDZV_BACKEND"
"""Rendezvous backend of torch.distributed.run (``rdzv_backend``)."""
MAX_RESTARTS = "ACCEL_MAX_RESTARTS"
"""Restarts of the worker group before the job fails (``max_restarts``)."""
CPU_AFFINITY = "ACCEL_CPU_AFFINITY"
"""Pin each process to the CPU cores near its GPU (``enable_cpu_affinity``)."""
DOWNCAST_BF16 = "ACCEL_DOWNCAST_BF16"
"""On TPU: ``yes`` casts float to bfloat16 and double to float32 (``downcast_bf16``)."""
USE_PARALLELISM_CONFIG = "ACCEL_USE_PARALLELISM_CONFIG"
"""``true``: the workers build a ``ParallelismConfig`` from ``PARALLELISM_CONFIG_*`` (``accel launch``)."""
LAUNCH_CONFIG = "ACCEL_LAUNCH_CONFIG"
"""JSON of every setting ``accel launch`` resolved; read with ``accel.utils.config.launched_config``."""
LAUNCH_ERROR_DIR = "ACCEL_LAUNCH_ERROR_DIR"
"""Directory where a failing worker started by ``accel launch`` writes its rank and traceback."""
FLIGHT_DIR = "ACCEL_FLIGHT_DIR"
"""Directory where each worker records its last collectives (set by ``accel launch``; off when unset)."""
PREEMPTION = "ACCEL_PREEMPTION"
"""``true``: SIGTERM makes every rank finish the step, save a checkpoint and exit 75 (``accel launch --preemption``)."""
PREEMPTION_GRACE_PERIOD = "ACCEL_PREEMPTION_GRACE_PERIOD"
"""Seconds after SIGTERM before a worker that has not checkpointed exits at once (default 25)."""
USE_SAGEMAKER = "ACCEL_USE_SAGEMAKER"
"""``true`` in an Amazon SageMaker training job submitted by ``accel launch`` (accel-cluster)."""
SAGEMAKER_DISTRIBUTED_TYPE = "ACCEL_SAGEMAKER_DISTRIBUTED_TYPE"
"""The distributed type of such a job (accel-cluster)."""

_TRUE = {"1", "true", "yes", "on", "y"}
_FALSE = {"0", "false", "no", "off", "n", ""}


def get_str(name: str, default: str | None = None) -> str | None:
    """The value of ``name``, or ``default`` when it is unset."""
    return os.environ.get(name, default)


def get_bool(name: str, default: bool = False) -> bool:
    """Parse ``name`` as a boolean (1/true/yes/on or 0/false/no/off)."""
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"environment variable {name}={value!r} is not a boolean: use 1 or 0")


def get_int(name: str, default: int | None = None) -> int | None:
    """Parse ``name`` as an integer."""
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer") from None


def get_list(name: str) -> list[str] | None:
    """Parse ``name`` as a comma-separated list; None when unset."""
    value = os.environ.get(name)
    if value is None:
        return None
    return [item.strip() for item in value.split(",") if item.strip()]


def world_info() -> tuple[int, int, int]:
    """``(rank, local_rank, world_size)`` from the launcher's variables (torchrun, Open MPI or MPICH)."""
    env = os.environ
    if "WORLD_SIZE" in env:
        world = int(env["WORLD_SIZE"])
        rank = int(env.get("RANK", 0))
        local = int(env.get("LOCAL_RANK", rank))
        return rank, local, world
    if "OMPI_COMM_WORLD_SIZE" in env:
        world = int(env["OMPI_COMM_WORLD_SIZE"])
        rank = int(env.get("OMPI_COMM_WORLD_RANK", 0))
        local = int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", rank))
        return rank, local, world
    if "PMI_SIZE" in env and "PMI_RANK" in env:  # MPICH / Intel MPI (Hydra)
        world, rank = int(env["PMI_SIZE"]), int(env["PMI_RANK"])
        return rank, int(env.get("MPI_LOCALRANKID", rank)), world
    return 0, 0, 1
