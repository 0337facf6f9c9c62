"""The keys of the config file: core's declarations.

Core declares its keys the way plugins declare theirs: :class:`~accel.config.options.Option`
objects in a :class:`~accel.config.options.Section` - :data:`CORE_SECTION` for the file's
top level, :data:`DYNAMO_SECTION` for ``dynamo_config``. Each value, from a config file, an
environment variable or a flag, is converted by the one :meth:`Option.convert
<accel.config.options.Option.convert>`, and ``accel launch``'s core flags are generated from
these declarations (:meth:`Section.add_arguments <accel.config.options.Section.add_arguments>`):
adding a setting is one ``Option`` here. Lists of allowed values come from :mod:`accel.catalog`.
The variables a process reads that are not config-file settings (``ACCEL_TORCH_DEVICE``,
``ACCEL_PLUGINS``, ...) are Options too (:data:`PROCESS_SECTION`), and every ``ACCEL_*`` /
``ACCELERATE_*`` variable is read through its declaration's :meth:`Option.from_env
<accel.config.options.Option.from_env>` (:data:`ENVIRONMENT` finds it by variable name).
Torch-free and yaml-free, like :mod:`accel.config.files` and :mod:`accel.config.resolution`,
which use these declarations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accel import catalog, env_vars
from accel.config.options import LAUNCH_CONFIG, Option, Section
from accel.config.options import parse_bool as parse_bool  # re-exported: its public path

# --------------------------------------------------------------------------- keys

DISTRIBUTED_TYPES = tuple(catalog.DISTRIBUTED_TYPES)
"""Values of ``distributed_type`` (``TPU`` is read as ``XLA``): :data:`accel.catalog.DISTRIBUTED_TYPES`."""

MULTI_DEVICE_TYPES = frozenset(catalog.DATA_PARALLEL_TYPES)

DYNAMO_BACKENDS = catalog.DYNAMO_BACKENDS
DYNAMO_MODES = catalog.DYNAMO_MODES

PROVIDERS: dict[str, str] = {
    name: row.package
    for table in (catalog.DISTRIBUTED_TYPES, catalog.PRECISIONS)
    for name, row in table.items()
    if row.package not in (catalog.CORE, "accel-ddp")
}
"""Distributed types and precisions that need a plugin other than accel-ddp, and its package."""

SECTION_PROVIDERS: dict[str, str] = {
    name: row.package for name, row in catalog.CONFIG_SECTIONS.items()
}
"""Config-file sections owned by plugins, and the package that owns each."""

HARDWARE = "hardware selection"
RESOURCES = "resource selection"
TRAINING = "training"
DISTRIBUTED = "distributed and multi-machine"
"""Headings of ``accel launch --help`` (:attr:`Option.group <accel.config.options.Option.group>`)."""


def _k(name: str, type: type | str, default: object = None, help: str = "", **kw: Any) -> Option:
    """A top-level key; it has no flag unless ``flag`` says so (``""``: ``--<name>``)."""
    kw.setdefault("flag", None)
    return Option(name, type, default, help=help, **kw)


_SAGEMAKER = (
    *(
        _k(name, str, None, text, flag="", metavar="VALUE", plugin="accel-cluster")
        for name, text in (
            ("ec2_instance_type", "SageMaker instance type, e.g. ml.p3.2xlarge"),
            ("iam_role_name", "IAM role (name or ARN) the training job runs as"),
            ("profile", "AWS profile with the credentials to submit the job"),
            ("region", "AWS region of the job"),
            ("base_job_name", "prefix of the training job's name"),
        )
    ),
    _k("py_version", "any", None, "SageMaker Python version"),
    _k("pytorch_version", "any", None, "SageMaker PyTorch version"),
    _k("transformers_version", "any", None, "SageMaker transformers version"),
    _k("sagemaker_inputs_file", str, None, "SageMaker inputs file"),
    _k("sagemaker_metrics_file", str, None, "SageMaker metrics file"),
    _k("additional_args", "any", None, "SageMaker additional arguments"),
)
"""Amazon SageMaker keys: accepted so such files load; launching them needs a plugin."""

CORE_SECTION = Section(
    "",
    [
        _k(
            "compute_environment",
            str,
            "LOCAL_MACHINE",
            "where the job runs",
            choices=("LOCAL_MACHINE", "AMAZON_SAGEMAKER"),
            nullable=False,
            standard=True,
        ),
        _k(
            "distributed_type",
            str,
            None,
            "how training is distributed",
            choices=DISTRIBUTED_TYPES,
            env=env_vars.DISTRIBUTED_TYPE,
            value_aliases=catalog.DISTRIBUTED_TYPE_ALIASES,
            standard=True,
        ),
        _k(
            "mixed_precision",
            str,
            "no",
            "mixed precision ("
            + ", ".join(
                f"{n} needs {r.package}"
                for n, r in catalog.PRECISIONS.items()
                if r.package != catalog.CORE
            )
            + ")",
            choices=tuple(catalog.PRECISIONS),
            env=env_vars.MIXED_PRECISION,
            nullable=False,
            standard=True,
            flag="",
            group=RESOURCES,
        ),
        _k(
            "use_cpu",
            bool,
            False,
            "run on the CPU even if an accelerator is present",
            env=env_vars.USE_CPU,
            standard=True,
            flag="cpu",
            store_true=True,
            group=HARDWARE,
        ),
        _k(
            "debug",
            bool,
            False,
            "check tensor shapes across ranks before each collective, and print "
            "torch.distributed's own report when a worker fails",
            env=env_vars.DEBUG_MODE,
            standard=True,
            flag="",
            store_true=True,
            group=TRAINING,
        ),
        _k(
            "num_processes",
            int,
            1,
            "total number of processes over all machines (Accelerate's meaning)",
            minimum=1,
            env=env_vars.NUM_PROCESSES,
            standard=True,
            flag="",
            group=RESOURCES,
        ),
        _k(
            "num_machines",
            int,
            1,
            "number of machines (MIN:MAX for elastic membership)",
            minimum=1,
            env=env_vars.NUM_MACHINES,
            nullable=False,
            standard=True,
            flag="",
            flag_aliases=("nnodes",),
            group=RESOURCES,
        ),
        _k(
            "machine_rank",
            int,
            0,
            "rank of this machine, 0 (the main one) to num_machines - 1",
            minimum=0,
            env=env_vars.MACHINE_RANK,
            nullable=False,
            standard=True,
            flag="",
            flag_aliases=("node_rank",),
            metavar="R",
            group=DISTRIBUTED,
        ),
        _k(
            "main_process_ip",
            "host",
            None,
            "address of machine 0",
            env=env_vars.MAIN_PROCESS_IP,
            flag="",
            flag_aliases=("master_addr",),
            group=DISTRIBUTED,
        ),
        _k(
            "main_process_port",
            "port",
            None,
            "port of the main process (29500 with several machines; a free one otherwise)",
            env=env_vars.MAIN_PROCESS_PORT,
            flag="",
            flag_aliases=("master_port",),
            group=DISTRIBUTED,
        ),
        _k(
            "gpu_ids",
            "gpu_ids",
            "all",
            "GPUs to use: all, or ids such as 0,1",
            env=env_vars.GPU_IDS,
            flag="",
            group=DISTRIBUTED,
            question="What GPU(s) (by id) should be used for training on this machine, "
            "as a comma-separated list?",
        ),
        _k(
            "rdzv_backend",
            str,
            "static",
            "rendezvous backend (c10d lets machines run different numbers of processes)",
            choices=catalog.RDZV_BACKENDS,
            env=env_vars.RDZV_BACKEND,
            nullable=False,
            standard=True,
            flag="",
            group=DISTRIBUTED,
            question="What rendezvous backend will you use?",
        ),
        _k(
            "same_network",
            bool,
            True,
            "all machines are on the same local network",
            standard=True,
            flag="",
            store_true=True,
            group=DISTRIBUTED,
        ),
        _k(
            "main_training_function",
            str,
            "main",
            "function to run (TPU pods, notebooks)",
            standard=True,
            flag="",
            metavar="NAME",
            group=TRAINING,
        ),
        _k(
            "enable_cpu_affinity",
            bool,
            False,
            "pin each process to the CPU cores near its GPU (NVIDIA only)",
            env=env_vars.CPU_AFFINITY,
            standard=True,
            flag="",
            store_true=True,
            group=RESOURCES,
        ),
        _k(
            "downcast_bf16",
            "yesno",
            "no",
            "on TPU: float as bfloat16 and double as float32",
            env=env_vars.DOWNCAST_BF16,
            standard=True,
            flag="",
            group=TRAINING,
        ),
        _k(
            "dynamo_backend",
            str,
            None,
            "(old location of dynamo_config.dynamo_backend)",
            choices=DYNAMO_BACKENDS,
        ),
        _k("dynamo_config", "section", None, "torch.compile settings"),
        *(
            _k(name, "section", None, f"{row.feature} settings ({row.package})")
            for name, row in catalog.CONFIG_SECTIONS.items()
        ),
        _k("ipex_config", "section", None, "(deprecated: IPEX is part of PyTorch)"),
        _k("use_mps_device", bool, None, "(deprecated: MPS is used when available)"),
        _k(
            "tpu_name",
            str,
            None,
            "the TPU pod (with --tpu_cluster)",
            flag="",
            metavar="NAME",
            plugin="accel-tpu",
        ),
        _k(
            "tpu_zone",
            str,
            None,
            "its zone, such as us-central2-b",
            flag="",
            metavar="ZONE",
            plugin="accel-tpu",
        ),
        _k(
            "tpu_use_cluster",
            bool,
            False,
            "run on every worker of a TPU pod (needs tpu_name and tpu_zone)",
            standard=True,
            flag="tpu_cluster",
            store_true=True,
            off_flag="no_tpu_cluster",
            plugin="accel-tpu",
        ),
        _k(
            "tpu_use_sudo",
            bool,
            False,
            "run the script with sudo on the pod workers",
            standard=True,
            flag="",
            store_true=True,
            plugin="accel-tpu",
        ),
        _k("tpu_vm", list, None, "TPU VM setup"),
        _k(
            "tpu_env",
            list,
            [],
            "environment variable for the XLA workers (repeatable)",
            standard=True,
            flag="env",
            metavar="NAME=VALUE",
            repeatable=True,
            plugin="accel-tpu",
        ),
        _k("command_file", str, None, "file of commands to run on TPU pod workers"),
        _k("commands", list, None, "commands to run on TPU pod workers"),
        *_SAGEMAKER,
        _k(
            "micro_batch_grow_after",
            int,
            1000,
            "train_step's automatic micro-batching: steps without out-of-memory after which "
            "a larger micro-batch is tried again (0: never)",
            minimum=0,
            env=env_vars.MICRO_BATCH_GROW_AFTER,
            flag="",
            group=TRAINING,
        ),
        # launch-only settings: flags and environment, never in the file
        _k(
            "gradient_accumulation_steps",
            int,
            None,
            "default gradient-accumulation steps",
            minimum=1,
            env=env_vars.GRADIENT_ACCUMULATION_STEPS,
            in_file=False,
            flag="",
            group=TRAINING,
        ),
        _k(
            "throughput_dir",
            str,
            None,
            "folder where each worker writes its throughput record at exit (accel launch uses "
            "a folder of its own and prints the run's throughput line from it)",
            env=env_vars.THROUGHPUT_DIR,
            in_file=False,
        ),
        _k(
            "max_num_machines",
            int,
            None,
            "elastic membership: up to this many machines join (torchrun --nnodes MIN:MAX); "
            "num_machines is the minimum (given as --num_machines MIN:MAX)",
            minimum=1,
            in_file=False,
        ),
        _k(
            "nproc_per_node",
            int,
            None,
            "processes on this machine (torchrun's meaning; default num_processes / num_machines)",
            minimum=1,
            in_file=False,
            flag="",
            group=RESOURCES,
        ),
        _k(
            "max_restarts",
            int,
            0,
            "restarts of the worker group before failing",
            minimum=0,
            env=env_vars.MAX_RESTARTS,
            in_file=False,
            nullable=False,
            flag="",
            group=DISTRIBUTED,
        ),
        _k(
            "monitor_interval",
            float,
            None,
            "seconds between checks of the workers",
            minimum=0.0,
            in_file=False,
            flag="",
            metavar="SECONDS",
            group=DISTRIBUTED,
        ),
        _k(
            "num_cpu_threads_per_process",
            int,
            None,
            "OMP_NUM_THREADS of each process (default 1 with several processes)",
            minimum=1,
            in_file=False,
            flag="",
            group=RESOURCES,
        ),
        _k(
            "rdzv_conf",
            str,
            None,
            "extra rendezvous settings (key1=value1,key2=value2)",
            in_file=False,
            flag="",
            metavar="K=V,...",
            group=DISTRIBUTED,
        ),
        _k(
            "rdzv_id",
            str,
            None,
            "job id shared by all machines (c10d)",
            in_file=False,
            flag="",
            metavar="ID",
            group=DISTRIBUTED,
        ),
        _k(
            "log_dir",
            str,
            None,
            "directory for the workers' logs (torch.distributed.run's)",
            in_file=False,
            flag="",
            metavar="DIR",
            group=DISTRIBUTED,
        ),
        _k(
            "tee",
            str,
            None,
            "also write worker streams to log_dir (0: none, 1: stdout, 2: stderr, 3: both)",
            choices=("0", "1", "2", "3"),
            in_file=False,
            flag="",
            group=DISTRIBUTED,
        ),
    ],
    title="accel",
)
"""Core's top-level keys (the section key ``""`` is the file's top level), with their
``accel launch`` flags (``flag``, ``group``, ``metavar``)."""

KEYS: dict[str, Option] = {option.name: option for option in CORE_SECTION}
"""Every core setting by name."""

DYNAMO_SECTION = Section(
    "dynamo_config",
    [
        Option(
            "dynamo_backend",
            str,
            "NO",
            help="backend (NO: off)",
            choices=DYNAMO_BACKENDS,
            env=env_vars.DYNAMO_BACKEND,
            group=RESOURCES,
            metavar="BACKEND",
            question="Which dynamo backend would you like to use?",
        ),
        Option(
            "dynamo_mode",
            str,
            "default",
            help="mode",
            choices=DYNAMO_MODES,
            env=env_vars.DYNAMO_MODE,
            group=RESOURCES,
            question="Which mode do you want to use?",
        ),
        Option(
            "dynamo_use_fullgraph",
            bool,
            False,
            help="fullgraph=True",
            env=env_vars.DYNAMO_USE_FULLGRAPH,
            store_true=True,
            group=RESOURCES,
            question="Do you want to use full graph mode?",
        ),
        Option(
            "dynamo_use_dynamic",
            bool,
            False,
            help="dynamic=True (dynamic shapes)",
            env=env_vars.DYNAMO_USE_DYNAMIC,
            store_true=True,
            group=RESOURCES,
            question="Do you want to enable dynamic shape tracing?",
        ),
        Option(
            "dynamo_use_regional_compilation",
            bool,
            False,
            help="compile repeated blocks one by one",
            env=env_vars.DYNAMO_USE_REGIONAL_COMPILATION,
            store_true=True,
            group=RESOURCES,
            question="Do you want to compile repeated blocks one by one (regional compilation)?",
        ),
    ],
    title="torch.compile",
    flat_dests=True,
)
"""The core-owned ``dynamo_config`` section; the config file is checked against it."""

DYNAMO_KEYS: dict[str, Option] = {option.name: option for option in DYNAMO_SECTION}
"""Keys of the ``dynamo_config`` section by name."""

SAGEMAKER_KEYS = frozenset(option.name for option in _SAGEMAKER)
"""The SageMaker keys (meaningful only with ``compute_environment: AMAZON_SAGEMAKER``)."""


def _variable(
    name: str, type: type | str, default: object, help: str, env: str, **kw: Any
) -> Option:
    """A variable a process reads that is no config-file key and has no flag."""
    return Option(name, type, default, help=help, env=env, flag=None, in_file=False, **kw)


PROCESS_SECTION = Section(
    "process",
    [
        _variable("backend", str, None, "the backend plugin to use", env_vars.BACKEND),
        _variable(
            "fsdp_on_cpu",
            bool,
            False,
            "shard with FSDP on CPU processes under accelerate.Accelerator too",
            env_vars.FSDP_ON_CPU,
        ),
        _variable("torch_device", str, None, "the device (cuda:1, cpu)", env_vars.TORCH_DEVICE),
        _variable("plugins", list, None, "entry-point plugins to load", env_vars.PLUGINS),
        _variable(
            "disable_plugins",
            list,
            [],
            "entry-point plugins not to load",
            env_vars.DISABLE_PLUGINS,
        ),
        _variable("config_dir", str, None, "directory of default_config.yaml", env_vars.CONFIG_DIR),
        _variable("config_file", str, None, "the config file", env_vars.CONFIG_FILE),
        _variable("log_level", str, None, "level of accel's loggers", env_vars.LOG_LEVEL),
        _variable("timeout", int, 1800, "seconds a collective waits", env_vars.TIMEOUT, minimum=1),
        _variable(
            "use_parallelism_config",
            bool,
            False,
            "build a ParallelismConfig from PARALLELISM_CONFIG_*",
            env_vars.USE_PARALLELISM_CONFIG,
        ),
        LAUNCH_CONFIG,
        _variable(
            "launch_error_dir",
            str,
            None,
            "where a failing worker writes its traceback",
            env_vars.LAUNCH_ERROR_DIR,
        ),
        _variable("flight_dir", str, None, "where workers record collectives", env_vars.FLIGHT_DIR),
        _variable(
            "preemption", bool, False, "checkpoint and exit 75 on SIGTERM", env_vars.PREEMPTION
        ),
        _variable(
            "preemption_grace_period",
            float,
            25.0,
            "seconds after SIGTERM before exiting at once",
            env_vars.PREEMPTION_GRACE_PERIOD,
            minimum=0.0,
        ),
        _variable(
            "async_copy_threads",
            int,
            None,
            "threads copying tensors of an asynchronous save",
            env_vars.ASYNC_COPY_THREADS,
            minimum=1,
        ),
        _variable(
            "async_save_timeout",
            float,
            3600.0,
            "seconds to wait for the other processes' asynchronous writes",
            env_vars.ASYNC_SAVE_TIMEOUT,
            minimum=0.0,
        ),
        *(
            _variable(f"use_{value.lower()}", bool, False, f"select {value}", flag)
            for flag, value in env_vars.USE_FLAGS.items()
        ),
    ],
    title="process environment",
)
"""The variables a process reads that are neither config-file keys nor flags, declared like
settings: one :meth:`~accel.config.options.Option.from_env` and one wording for each."""

ENVIRONMENT: dict[str, Option] = {
    option.env: option
    for section in (CORE_SECTION, DYNAMO_SECTION, PROCESS_SECTION)
    for option in section
    if option.env
}
"""Core's declaration of each variable it reads, by variable name (``ACCEL_USE_CPU``)."""


def launched_distributed_type(environ: Mapping[str, str] | None = None) -> str | None:
    """The distributed type a launcher asked for: ``ACCEL_DISTRIBUTED_TYPE`` (or
    ``ACCELERATE_DISTRIBUTED_TYPE``), else the one an ``ACCELERATE_USE_DEEPSPEED`` /
    ``_FSDP`` / ``_MEGATRON_LM`` switch names, else None."""
    chosen = KEYS["distributed_type"].from_env(environ)
    if chosen is not None:
        return chosen
    for flag, value in env_vars.USE_FLAGS.items():
        if ENVIRONMENT[flag].from_env(environ):
            return value
    return None
