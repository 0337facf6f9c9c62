"""The names of the ``ACCEL_*`` environment variables, in one place, and the launcher's rank variables.

Everything the launcher decides reaches the worker processes as environment variables.
Each variable is declared as an :class:`~accel.config.options.Option` (core's in
:mod:`accel.config.core_options`: ``env=`` of a config key, or :data:`~accel.config.core_options.PROCESS_SECTION`)
and read only through it: ``KEYS["use_cpu"].from_env()`` converts with the one
:meth:`~accel.config.options.Option.convert` and words an error as every setting does.

Accelerate's spelling of each variable means the same: when ``ACCEL_X`` is unset,
``ACCELERATE_X`` is read instead (transformers' ``TrainingArguments`` and users of
``accelerate launch`` set and read those), and ``ACCELERATE_USE_DEEPSPEED`` /
``ACCELERATE_USE_FSDP`` / ``ACCELERATE_USE_MEGATRON_LM`` select the distributed type
when ``ACCEL_DISTRIBUTED_TYPE`` is unset. The launcher exports both spellings
(:func:`accelerate_names`). :func:`world_info` reads the rank and world size that torchrun,
Open MPI or MPICH set. Accelerate's helpers over ``os.environ`` (``patch_environment``,
``str_to_bool``, ...) are :mod:`accel.env_helpers`.
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
FSDP_ON_CPU = "ACCEL_FSDP_ON_CPU"
"""Shard with FSDP on CPU processes under ``accelerate.Accelerator`` too (whose default is
Accelerate's rule: FSDP only on accelerator devices; ``accel.Accelerator`` always shards)."""
TORCH_DEVICE = "ACCEL_TORCH_DEVICE"
"""Force the device (``cuda:1``, ``cpu``, ...): Accelerate's ``ACCELERATE_TORCH_DEVICE``."""
DEBUG_MODE = "ACCEL_DEBUG_MODE"
"""Check shapes across ranks before each collective."""
GRADIENT_ACCUMULATION_STEPS = "ACCEL_GRADIENT_ACCUMULATION_STEPS"
"""Default number of gradient-accumulation steps."""
MICRO_BATCH_GROW_AFTER = "ACCEL_MICRO_BATCH_GROW_AFTER"
"""Steps after which ``train_step`` tries a split larger again (0: never)."""
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

# -- settings of `accel launch` (the environment layer of accel.config.resolution) --
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
"""JSON of every setting ``accel launch`` resolved; read with ``accel.config.launched.launched_config``."""
LAUNCH_ERROR_DIR = "ACCEL_LAUNCH_ERROR_DIR"
"""Directory where a failing worker started by ``accel launch`` writes its rank and traceback."""
FLIGHT_DIR = "ACCEL_FLIGHT_DIR"
"""Directory where each worker records its last collectives (set by ``accel launch``; off when unset)."""
THROUGHPUT_DIR = "ACCEL_THROUGHPUT_DIR"
"""Folder where each worker writes its throughput record at exit (``throughput_dir``; ``accel
launch`` sets a folder of its own and prints the run's throughput line from it)."""
PREEMPTION = "ACCEL_PREEMPTION"
"""``true``: SIGTERM makes every rank finish the step, save a checkpoint and exit 75 (``accel launch --preemption``)."""
PREEMPTION_GRACE_PERIOD = "ACCEL_PREEMPTION_GRACE_PERIOD"
"""Seconds after SIGTERM before a worker that has not checkpointed exits at once (default 25)."""
USE_SAGEMAKER = "ACCEL_USE_SAGEMAKER"
"""``true`` in an Amazon SageMaker training job submitted by ``accel launch`` (accel-cluster)."""
SAGEMAKER_DISTRIBUTED_TYPE = "ACCEL_SAGEMAKER_DISTRIBUTED_TYPE"
"""The distributed type of such a job (accel-cluster)."""
ASYNC_COPY_THREADS = "ACCEL_ASYNC_COPY_THREADS"
"""Threads copying the tensors of an asynchronous save (default: up to 4)."""
ASYNC_SAVE_TIMEOUT = "ACCEL_ASYNC_SAVE_TIMEOUT"
"""Seconds the process finishing an asynchronous save waits for the others (default 3600)."""


ACCEL_PREFIX = "ACCEL_"
ACCELERATE_PREFIX = "ACCELERATE_"

USE_FLAGS = {
    "ACCELERATE_USE_DEEPSPEED": "DEEPSPEED",
    "ACCELERATE_USE_FSDP": "FSDP",
    "ACCELERATE_USE_MEGATRON_LM": "MEGATRON_LM",
}
"""Accelerate's per-strategy switches and the distributed type each one means."""


def accelerate_name(name: str) -> str | None:
    """Accelerate's spelling of an ``ACCEL_*`` variable (``ACCEL_X`` -> ``ACCELERATE_X``), else None."""
    if name.startswith(ACCEL_PREFIX):
        return ACCELERATE_PREFIX + name[len(ACCEL_PREFIX) :]
    return None


EXPORTED_TO_ACCELERATE = frozenset(
    {
        MIXED_PRECISION,
        USE_CPU,
        TORCH_DEVICE,
        DEBUG_MODE,
        GRADIENT_ACCUMULATION_STEPS,
        DYNAMO_BACKEND,
        DYNAMO_MODE,
        DYNAMO_USE_FULLGRAPH,
        DYNAMO_USE_DYNAMIC,
        DYNAMO_USE_REGIONAL_COMPILATION,
        LOG_LEVEL,
        CPU_AFFINITY,
        DOWNCAST_BF16,
        USE_PARALLELISM_CONFIG,
        USE_SAGEMAKER,
        SAGEMAKER_DISTRIBUTED_TYPE,
    }
)
"""The launcher's variables that Accelerate's launcher also sets (as ``ACCELERATE_*``)."""


def accelerate_names(env: dict[str, str], distributed_type: str | None) -> dict[str, str]:
    """``env`` with Accelerate's spelling of each ``ACCEL_*`` variable added (for the workers),
    and the ``ACCELERATE_USE_*`` switch of ``distributed_type`` (the workers' distributed type).

    transformers and other code written for Accelerate read ``ACCELERATE_MIXED_PRECISION``,
    ``ACCELERATE_USE_FSDP``, ... from the environment of a launched process.
    """
    out = dict(env)
    for name, value in env.items():
        if name in EXPORTED_TO_ACCELERATE:
            out.setdefault(accelerate_name(name) or name, value)
    distributed_type = str(distributed_type or "").upper()
    for flag, value in USE_FLAGS.items():
        if distributed_type == value:
            out.setdefault(flag, "true")
    return out


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
