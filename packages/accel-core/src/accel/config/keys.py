"""The keys of the config file: core's declarations and the conversion of top-level values.

Core declares its keys the way plugins declare theirs: :class:`~accel.config.sections.Option`
objects in a :class:`~accel.config.sections.Section` - :data:`CORE_SECTION` for the file's
top level, :data:`DYNAMO_SECTION` for ``dynamo_config``. Torch-free and yaml-free, like
:mod:`accel.config.settings`, which uses these declarations.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Mapping
from typing import Any

from accel import catalog, environment
from accel.config.sections import _FALSE, _TRUE, Option, Section
from accel.config.sections import parse_bool as parse_bool  # re-exported: its public path
from accel.errors import ConfigError

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

SECTION_DISTRIBUTED_TYPE = catalog.SECTION_DISTRIBUTED_TYPE
"""Sections that only matter with one distributed type (they may sit empty otherwise)."""


def core_option(name: str, kind: str, default: Any = None, help: str = "", **kw: Any) -> Option:
    """The :class:`~accel.config.sections.Option` of a top-level key of ``kind`` (the kinds of
    :func:`coerce`: ``choice``, ``int``, ..., ``gpu_ids``, ``port``, ``yesno``, ``section``).

    Its values convert with :func:`coerce`; core's flags are written in accel-cli (no ``flag``).
    """
    option_type = str if kind == "choice" else kind
    reader = functools.partial(_read, kind, name)
    return Option(name, option_type, default, help=help, flag=None, reader=reader, **kw)


def _read(kind: str, name: str, value: Any, label: str) -> Any:
    key = KEYS.get(name) or core_option(name, kind)
    return coerce(key, value, label)


_k = core_option  # shorthand for the table below


CORE_SECTION = Section(
    "",
    [
        _k(
            "compute_environment",
            "choice",
            "LOCAL_MACHINE",
            "where the job runs",
            choices=("LOCAL_MACHINE", "AMAZON_SAGEMAKER"),
            nullable=False,
            standard=True,
        ),
        _k(
            "distributed_type",
            "choice",
            None,
            "how training is distributed",
            choices=DISTRIBUTED_TYPES,
            env=environment.DISTRIBUTED_TYPE,
            value_aliases={"TPU": "XLA"},
            standard=True,
        ),
        _k(
            "mixed_precision",
            "choice",
            "no",
            "mixed precision",
            choices=tuple(catalog.PRECISIONS),
            env=environment.MIXED_PRECISION,
            nullable=False,
            standard=True,
        ),
        _k(
            "use_cpu",
            "bool",
            False,
            "train on the CPU even if an accelerator is present",
            env=environment.USE_CPU,
            standard=True,
        ),
        _k(
            "debug",
            "bool",
            False,
            "check shapes across ranks before collectives",
            env=environment.DEBUG_MODE,
            standard=True,
        ),
        _k(
            "num_processes",
            "int",
            1,
            "total number of processes, over all machines",
            minimum=1,
            env=environment.NUM_PROCESSES,
            standard=True,
        ),
        _k(
            "num_machines",
            "int",
            1,
            "number of machines",
            minimum=1,
            env=environment.NUM_MACHINES,
            nullable=False,
            standard=True,
        ),
        _k(
            "machine_rank",
            "int",
            0,
            "rank of this machine (0 is the main one)",
            minimum=0,
            env=environment.MACHINE_RANK,
            nullable=False,
            standard=True,
        ),
        _k(
            "main_process_ip",
            "str",
            None,
            "address of the machine of rank 0",
            env=environment.MAIN_PROCESS_IP,
        ),
        _k(
            "main_process_port",
            "port",
            None,
            "port of the main process (29500 when unset)",
            env=environment.MAIN_PROCESS_PORT,
        ),
        _k(
            "gpu_ids",
            "gpu_ids",
            "all",
            "GPUs to use: all, or a comma-separated list of ids",
            env=environment.GPU_IDS,
        ),
        _k(
            "rdzv_backend",
            "choice",
            "static",
            "rendezvous backend of torch.distributed.run",
            choices=catalog.RDZV_BACKENDS,
            env=environment.RDZV_BACKEND,
            nullable=False,
            standard=True,
        ),
        _k(
            "same_network",
            "bool",
            True,
            "whether all machines are on the same local network",
            standard=True,
        ),
        _k(
            "main_training_function",
            "str",
            "main",
            "function to run (TPU pods and notebooks)",
            standard=True,
        ),
        _k(
            "enable_cpu_affinity",
            "bool",
            False,
            "pin each process to the CPU cores near its GPU",
            env=environment.CPU_AFFINITY,
            standard=True,
        ),
        _k(
            "downcast_bf16",
            "yesno",
            "no",
            "on TPU, cast float to bfloat16 and double to float32",
            env=environment.DOWNCAST_BF16,
            standard=True,
        ),
        _k(
            "dynamo_backend",
            "choice",
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
        _k("use_mps_device", "bool", None, "(deprecated: MPS is used when available)"),
        _k("tpu_name", "str", None, "name of the TPU"),
        _k("tpu_zone", "str", None, "zone of the TPU"),
        _k("tpu_use_cluster", "bool", False, "whether the TPU is a pod", standard=True),
        _k("tpu_use_sudo", "bool", False, "run TPU setup commands with sudo", standard=True),
        _k("tpu_vm", "list", None, "TPU VM setup"),
        _k("tpu_env", "list", [], "environment variables for TPU workers", standard=True),
        _k("command_file", "str", None, "file of commands to run on TPU pod workers"),
        _k("commands", "list", None, "commands to run on TPU pod workers"),
        # Amazon SageMaker keys: accepted so such files load; launching them needs a plugin.
        _k("base_job_name", "str", None, "SageMaker job name"),
        _k("ec2_instance_type", "str", None, "SageMaker instance type"),
        _k("iam_role_name", "str", None, "SageMaker IAM role"),
        _k("profile", "str", None, "AWS profile"),
        _k("region", "str", None, "AWS region"),
        _k("py_version", "any", None, "SageMaker Python version"),
        _k("pytorch_version", "any", None, "SageMaker PyTorch version"),
        _k("transformers_version", "any", None, "SageMaker transformers version"),
        _k("sagemaker_inputs_file", "str", None, "SageMaker inputs file"),
        _k("sagemaker_metrics_file", "str", None, "SageMaker metrics file"),
        _k("additional_args", "any", None, "SageMaker additional arguments"),
        # launch-only settings: flags and environment, never in the file
        _k(
            "gradient_accumulation_steps",
            "int",
            None,
            "default gradient-accumulation steps",
            minimum=1,
            env=environment.GRADIENT_ACCUMULATION_STEPS,
            in_file=False,
        ),
        _k(
            "max_num_machines",
            "int",
            None,
            "elastic membership: up to this many machines join (torchrun --nnodes MIN:MAX); "
            "num_machines is the minimum",
            minimum=1,
            in_file=False,
        ),
        _k(
            "nproc_per_node",
            "int",
            None,
            "processes on this machine (default: num_processes / num_machines)",
            minimum=1,
            in_file=False,
        ),
        _k(
            "max_restarts",
            "int",
            0,
            "restarts of the worker group before failing",
            minimum=0,
            env=environment.MAX_RESTARTS,
            in_file=False,
            nullable=False,
        ),
        _k(
            "monitor_interval",
            "float",
            None,
            "seconds between checks of the workers",
            minimum=0.0,
            in_file=False,
        ),
        _k(
            "num_cpu_threads_per_process",
            "int",
            None,
            "OMP_NUM_THREADS of each process",
            minimum=1,
            in_file=False,
        ),
        _k(
            "rdzv_conf",
            "str",
            None,
            "extra rendezvous settings (key1=value1,key2=value2)",
            in_file=False,
        ),
        _k(
            "rdzv_id", "str", None, "job id shared by all machines (c10d rendezvous)", in_file=False
        ),
        _k(
            "log_dir",
            "str",
            None,
            "directory for torch.distributed.run's worker logs",
            in_file=False,
        ),
        _k("tee", "str", None, "tee worker std streams into log_dir (0, 1, 2 or 3)", in_file=False),
    ],
    title="accel",
)
"""Core's top-level keys (the section key ``""`` is the file's top level); core's
``accel launch`` flags and ``accel config`` questions are written in accel-cli."""

KEYS: dict[str, Option] = {option.name: option for option in CORE_SECTION}
"""Every core setting by name."""

DYNAMO_SECTION = Section(
    "dynamo_config",
    [
        Option(
            "dynamo_backend",
            str,
            "NO",
            help="torch.compile backend",
            choices=DYNAMO_BACKENDS,
            env=environment.DYNAMO_BACKEND,
        ),
        Option(
            "dynamo_mode",
            str,
            "default",
            help="torch.compile mode",
            choices=DYNAMO_MODES,
            env=environment.DYNAMO_MODE,
        ),
        Option(
            "dynamo_use_fullgraph",
            bool,
            False,
            help="torch.compile fullgraph",
            env=environment.DYNAMO_USE_FULLGRAPH,
        ),
        Option(
            "dynamo_use_dynamic",
            bool,
            False,
            help="torch.compile dynamic shapes",
            env=environment.DYNAMO_USE_DYNAMIC,
        ),
        Option(
            "dynamo_use_regional_compilation",
            bool,
            False,
            help="compile repeated blocks one by one",
            env=environment.DYNAMO_USE_REGIONAL_COMPILATION,
        ),
    ],
    title="torch.compile",
)
"""The core-owned ``dynamo_config`` section; the config file is checked against it."""

DYNAMO_KEYS: dict[str, Option] = {option.name: option for option in DYNAMO_SECTION}
"""Keys of the ``dynamo_config`` section by name."""

SAGEMAKER_KEYS = frozenset(
    {
        "base_job_name",
        "ec2_instance_type",
        "iam_role_name",
        "profile",
        "region",
        "py_version",
        "pytorch_version",
        "transformers_version",
        "sagemaker_inputs_file",
        "sagemaker_metrics_file",
        "additional_args",
    }
)

# --------------------------------------------------------------------------- coercion


def _allowed(key: Option) -> str:
    if key.kind == "choice":
        return "use one of " + ", ".join(key.choices)
    return {
        "int": "use a whole number"
        + (f" >= {int(key.minimum)}" if key.minimum is not None else ""),
        "float": "use a number" + (f" >= {key.minimum}" if key.minimum is not None else ""),
        "bool": "use true or false",
        "yesno": "use yes or no",
        "str": "use a string",
        "list": "use a list",
        "port": "use a port number from 1 to 65535",
        "gpu_ids": "use all or comma-separated GPU ids such as 0,1",
        "section": "use a mapping of settings (or {})",
    }.get(key.kind, "")


def coerce(key: Option, value: Any, where: str) -> Any:
    """``value`` converted to the type of core's key ``key``; ConfigError naming ``where`` otherwise.

    Strings (from the environment and flags) are parsed; YAML's own types are accepted.
    """

    def bad(problem: str | None = None) -> ConfigError:
        shown = value if not isinstance(value, str) else repr(value)
        text = problem or f"{shown} is not allowed"
        return ConfigError(f"{where}: {key.name}: {text}; {_allowed(key)}")

    if value is None:
        if key.nullable:
            return None
        raise bad("must not be empty")
    kind = key.kind
    if kind == "any":
        return value
    if kind == "choice":
        if value is False and "no" in key.choices:
            return "no"  # YAML reads a bare `no` as false
        if value is False and "NO" in key.choices:
            return "NO"
        if not isinstance(value, str):
            raise bad()
        text = value.strip()
        canon = {c.lower(): c for c in key.choices}
        canon.update({a.lower(): c for a, c in key.value_aliases.items()})
        if text.lower() in canon:
            return canon[text.lower()]
        close = difflib.get_close_matches(text, list(key.choices), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise bad(f"{text!r} is not allowed{hint}")
    if kind in ("bool", "yesno"):
        if isinstance(value, bool):
            flag = value
        elif isinstance(value, int) and value in (0, 1):
            flag = bool(value)
        elif isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            flag = value.strip().lower() in _TRUE
        else:
            raise bad()
        return ("yes" if flag else "no") if kind == "yesno" else flag
    if kind in ("int", "port"):
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise bad(f"{value!r} is not a whole number") from None
        if not isinstance(value, int):
            raise bad()
        if kind == "port" and not 1 <= value <= 65535:
            raise bad(f"{value} is out of range")
        if key.minimum is not None and value < key.minimum:
            raise bad(f"{value} is too small")
        return value
    if kind == "float":
        if isinstance(value, bool):
            raise bad()
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise bad(f"{value!r} is not a number") from None
        if key.minimum is not None and number < key.minimum:
            raise bad(f"{value} is too small")
        return number
    if kind == "str":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            raise bad()
        if key.name == "main_process_ip" and (not value.strip() or re.search(r"\s", value.strip())):
            raise bad(f"{value!r} is not a host name or IP address")
        return value.strip()
    if kind == "list":
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        if not isinstance(value, (list, tuple)):
            raise bad()
        return list(value)
    if kind == "gpu_ids":
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, int):
            value = str(value)
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        if not isinstance(value, str):
            raise bad()
        text = value.strip().replace(" ", "")
        if text.lower() == "all":
            return "all"
        if not re.fullmatch(r"\d+(,\d+)*", text):
            raise bad(f"{value!r} is not a list of GPU ids")
        ids = text.split(",")
        if len(set(ids)) != len(ids):
            raise bad(f"{value!r} names a GPU twice")
        return text
    if kind == "section":
        if not isinstance(value, Mapping):
            raise bad()
        return dict(value)
    raise AssertionError(kind)
