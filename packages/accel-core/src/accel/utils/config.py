"""The configuration file: Accelerate's ``default_config.yaml`` format, validated and layered.

An Accelerate config file (YAML, or JSON when the name ends in ``.json``) loads
unchanged. Core checks its own keys; each plugin checks the section it owns
(``fsdp_config``, ``deepspeed_config``, ...) through the ``accel_config_sections``
hook. Every error names the file, the key and what is allowed.

Settings are resolved in layers, each recording where its value came from::

    default  <  config file  <  environment (ACCEL_*)  <  command-line flag

This module imports neither torch nor yaml at import time: ``accel launch --help``
and bad-input errors stay fast.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import environment
from ..errors import ConfigError, MissingPluginError
from ..providers import PROVIDERS as _PROVIDERS

CONFIG_FILE_NAME = "default_config.yaml"
"""Name of the default config file inside :func:`default_config_dir`."""

JSON_CONFIG_FILE_NAME = "default_config.json"
"""Name used when only a JSON default config exists (as Accelerate once wrote)."""

# --------------------------------------------------------------------------- locations


def default_config_dir() -> Path:
    """``$ACCEL_CONFIG_DIR``, else ``$HF_HOME/accel``, else ``$XDG_CACHE_HOME/huggingface/accel``,
    else ``~/.cache/huggingface/accel``."""
    explicit = environment.get_str(environment.CONFIG_DIR)
    if explicit:
        return Path(explicit).expanduser()
    hf_home = os.environ.get("HF_HOME")
    if hf_home:
        return Path(hf_home).expanduser() / "accel"
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "huggingface" / "accel"
    return Path("~/.cache/huggingface/accel").expanduser()


def default_config_file() -> Path:
    """The default config file: ``default_config.yaml`` in :func:`default_config_dir`.

    When only ``default_config.json`` exists there, that file.
    """
    directory = default_config_dir()
    yaml_file = directory / CONFIG_FILE_NAME
    json_file = directory / JSON_CONFIG_FILE_NAME
    if not yaml_file.exists() and json_file.exists():
        return json_file
    return yaml_file


def find_config_file(explicit: str | os.PathLike | None = None) -> tuple[Path | None, str]:
    """The config file to use and why: ``(path, reason)``.

    ``explicit`` (``--config_file``) wins, then ``$ACCEL_CONFIG_FILE``, then the default
    file when it exists. ``(None, reason)`` when there is none.
    """
    if explicit:
        return Path(explicit).expanduser(), "flag --config_file"
    from_env = environment.get_str(environment.CONFIG_FILE)
    if from_env:
        return Path(from_env).expanduser(), f"env {environment.CONFIG_FILE}"
    default = default_config_file()
    if default.is_file():
        return default, "default location"
    return None, f"no file at {default}"


# --------------------------------------------------------------------------- keys

DISTRIBUTED_TYPES = (
    "NO",
    "MULTI_CPU",
    "MULTI_GPU",
    "MULTI_XPU",
    "MULTI_NPU",
    "MULTI_MLU",
    "MULTI_MUSA",
    "MULTI_HPU",
    "MULTI_SDAA",
    "FSDP",
    "DEEPSPEED",
    "MEGATRON_LM",
    "XLA",
)
"""Values of ``distributed_type`` (``TPU`` is read as ``XLA``)."""

MULTI_DEVICE_TYPES = frozenset(t for t in DISTRIBUTED_TYPES if t.startswith("MULTI_"))

DYNAMO_BACKENDS = (
    "NO",
    "EAGER",
    "AOT_EAGER",
    "INDUCTOR",
    "AOT_TS_NVFUSER",
    "NVPRIMS_NVFUSER",
    "CUDAGRAPHS",
    "OFI",
    "FX2TRT",
    "ONNXRT",
    "TENSORRT",
    "AOT_TORCHXLA_TRACE_ONCE",
    "TORCHXLA_TRACE_ONCE",
    "IPEX",
    "TVM",
    "HPU_BACKEND",
)
DYNAMO_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

PROVIDERS: dict[str, str] = {
    name: package
    for name, (_, package) in _PROVIDERS.items()
    if package != "accel-ddp" and name != "bnb"
}
"""Distributed types and precisions that need a plugin, and the package providing it."""

SECTION_PROVIDERS: dict[str, str] = {
    "fsdp_config": "accel-fsdp",
    "deepspeed_config": "accel-deepspeed",
    "megatron_lm_config": "accel-megatron",
    "fp8_config": "accel-fp8",
    "parallelism_config": "accel-fsdp",
    "mpirun_config": "a plugin providing an MPI launcher",
}
"""Config-file sections owned by plugins, and the package that owns each."""

SECTION_DISTRIBUTED_TYPE = {
    "fsdp_config": "FSDP",
    "deepspeed_config": "DEEPSPEED",
    "megatron_lm_config": "MEGATRON_LM",
}
"""Sections that only matter with one distributed type (they may sit empty otherwise)."""


@dataclass(frozen=True)
class Key:
    """One setting: its type, default, allowed values and where else it may come from."""

    name: str
    kind: str
    """``choice``, ``int``, ``float``, ``bool``, ``str``, ``list``, ``gpu_ids``, ``port``,
    ``yesno``, ``section`` or ``any``."""
    default: Any = None
    help: str = ""
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    env: str | None = None
    """Environment variable of the environment layer."""
    in_file: bool = True
    """Whether the key may appear in a config file (launch-only settings may not)."""
    nullable: bool = True
    aliases: Mapping[str, str] = field(default_factory=dict)
    """Accepted spellings mapped to the canonical value (``TPU`` -> ``XLA``)."""


def _k(name: str, kind: str, default: Any = None, help: str = "", **kw: Any) -> Key:
    return Key(name, kind, default, help, **kw)


_KEYS: list[Key] = [
    _k(
        "compute_environment",
        "choice",
        "LOCAL_MACHINE",
        "where the job runs",
        choices=("LOCAL_MACHINE", "AMAZON_SAGEMAKER"),
        nullable=False,
    ),
    _k(
        "distributed_type",
        "choice",
        None,
        "how training is distributed",
        choices=DISTRIBUTED_TYPES,
        env=environment.DISTRIBUTED_TYPE,
        aliases={"TPU": "XLA"},
    ),
    _k(
        "mixed_precision",
        "choice",
        "no",
        "mixed precision",
        choices=("no", "fp16", "bf16", "fp8"),
        env=environment.MIXED_PRECISION,
        nullable=False,
    ),
    _k(
        "use_cpu",
        "bool",
        False,
        "train on the CPU even if an accelerator is present",
        env=environment.USE_CPU,
    ),
    _k(
        "debug",
        "bool",
        False,
        "check shapes across ranks before collectives",
        env=environment.DEBUG_MODE,
    ),
    _k(
        "num_processes",
        "int",
        1,
        "total number of processes, over all machines",
        minimum=1,
        env=environment.NUM_PROCESSES,
    ),
    _k(
        "num_machines",
        "int",
        1,
        "number of machines",
        minimum=1,
        env=environment.NUM_MACHINES,
        nullable=False,
    ),
    _k(
        "machine_rank",
        "int",
        0,
        "rank of this machine (0 is the main one)",
        minimum=0,
        env=environment.MACHINE_RANK,
        nullable=False,
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
        choices=("static", "c10d", "etcd", "etcd-v2"),
        env=environment.RDZV_BACKEND,
        nullable=False,
    ),
    _k("same_network", "bool", True, "whether all machines are on the same local network"),
    _k("main_training_function", "str", "main", "function to run (TPU pods and notebooks)"),
    _k(
        "enable_cpu_affinity",
        "bool",
        False,
        "pin each process to the CPU cores near its GPU",
        env=environment.CPU_AFFINITY,
    ),
    _k(
        "downcast_bf16",
        "yesno",
        "no",
        "on TPU, cast float to bfloat16 and double to float32",
        env=environment.DOWNCAST_BF16,
    ),
    _k(
        "dynamo_backend",
        "choice",
        None,
        "(old location of dynamo_config.dynamo_backend)",
        choices=DYNAMO_BACKENDS,
    ),
    _k("dynamo_config", "section", None, "torch.compile settings"),
    _k("fsdp_config", "section", None, "FSDP settings (accel-fsdp)"),
    _k("deepspeed_config", "section", None, "DeepSpeed settings (accel-deepspeed)"),
    _k("megatron_lm_config", "section", None, "Megatron-LM settings (accel-megatron)"),
    _k("fp8_config", "section", None, "FP8 settings (accel-fp8)"),
    _k("parallelism_config", "section", None, "tensor/context parallel sizes"),
    _k("mpirun_config", "section", None, "mpirun launcher settings"),
    _k("ipex_config", "section", None, "(deprecated: IPEX is part of PyTorch)"),
    _k("use_mps_device", "bool", None, "(deprecated: MPS is used when available)"),
    _k("tpu_name", "str", None, "name of the TPU"),
    _k("tpu_zone", "str", None, "zone of the TPU"),
    _k("tpu_use_cluster", "bool", False, "whether the TPU is a pod"),
    _k("tpu_use_sudo", "bool", False, "run TPU setup commands with sudo"),
    _k("tpu_vm", "list", None, "TPU VM setup"),
    _k("tpu_env", "list", [], "environment variables for TPU workers"),
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
    _k("rdzv_id", "str", None, "job id shared by all machines (c10d rendezvous)", in_file=False),
    _k("log_dir", "str", None, "directory for torch.distributed.run's worker logs", in_file=False),
    _k("tee", "str", None, "tee worker std streams into log_dir (0, 1, 2 or 3)", in_file=False),
]

KEYS: dict[str, Key] = {key.name: key for key in _KEYS}
"""Every core setting by name."""

DYNAMO_KEYS: dict[str, Key] = {
    k.name: k
    for k in [
        _k(
            "dynamo_backend",
            "choice",
            "NO",
            "torch.compile backend",
            choices=DYNAMO_BACKENDS,
            env=environment.DYNAMO_BACKEND,
        ),
        _k(
            "dynamo_mode",
            "choice",
            "default",
            "torch.compile mode",
            choices=DYNAMO_MODES,
            env=environment.DYNAMO_MODE,
        ),
        _k(
            "dynamo_use_fullgraph",
            "bool",
            False,
            "torch.compile fullgraph",
            env=environment.DYNAMO_USE_FULLGRAPH,
        ),
        _k(
            "dynamo_use_dynamic",
            "bool",
            False,
            "torch.compile dynamic shapes",
            env=environment.DYNAMO_USE_DYNAMIC,
        ),
        _k(
            "dynamo_use_regional_compilation",
            "bool",
            False,
            "compile repeated blocks one by one",
            env=environment.DYNAMO_USE_REGIONAL_COMPILATION,
        ),
    ]
}
"""Keys of the core-owned ``dynamo_config`` section."""

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

_TRUE = {"true", "yes", "1", "on", "y"}
_FALSE = {"false", "no", "0", "off", "n"}

# --------------------------------------------------------------------------- coercion


def _allowed(key: Key) -> str:
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


def coerce(key: Key, value: Any, where: str) -> Any:
    """``value`` converted to the type of ``key``; ConfigError naming ``where`` otherwise.

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
        canon.update({a.lower(): c for a, c in key.aliases.items()})
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


# --------------------------------------------------------------------------- provenance


@dataclass(frozen=True)
class Source:
    """Where a resolved value came from."""

    kind: str
    """``default``, ``file``, ``env``, ``flag`` or ``derived``."""
    detail: str = ""
    """The file path, variable name, flag or reason."""

    RANK = {"default": 0, "file": 1, "env": 2, "flag": 3, "derived": 4}

    def __str__(self) -> str:
        if self.kind == "derived" and self.detail:
            return f"derived ({self.detail})"
        return f"{self.kind} {self.detail}".strip()

    @property
    def rank(self) -> int:
        """Precedence of this layer (higher wins)."""
        return self.RANK.get(self.kind, 0)


DEFAULT = Source("default")

# --------------------------------------------------------------------------- loading files


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """Parse ``path`` (YAML, or JSON for ``*.json``) into a mapping; no validation of keys."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(
            f"{path}: config file does not exist; create one with `accel config` or fix the path"
        )
    if path.is_dir():
        raise ConfigError(
            f"{path}: is a directory, not a config file; pass the YAML file inside it"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the config file ({exc})") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text) if text.strip() else None
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{path}:{exc.lineno}:{exc.colno}: malformed JSON ({exc.msg}); fix the syntax"
            ) from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ConfigError(f"{where}: malformed YAML ({problem}); fix the syntax") from None
    if data is None:
        raise ConfigError(
            f"{path}: the config file is empty; write one with `accel config` or `accel config default`"
        )
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: the config file must be a mapping of keys to values, not a {type(data).__name__}"
        )
    return data


def validate(data: Mapping[str, Any], origin: str = "<config>") -> dict[str, Any]:
    """Check and normalise a config mapping; ConfigError names ``origin``, the key and the fix.

    Plugin sections are only checked for shape here; :func:`check_sections` runs
    the plugins' validators.
    """
    out: dict[str, Any] = {}
    for name, value in data.items():
        if not isinstance(name, str):
            raise ConfigError(f"{origin}: key {name!r} is not a string; keys are setting names")
        key = KEYS.get(name)
        if key is None and name.endswith("_config") and name in _plugin_section_names():
            key = Key(name, "section", None, "a plugin's section")  # a third-party plugin's own
        if key is None or not key.in_file:
            if key is not None:
                raise ConfigError(
                    f"{origin}: {name}: cannot be set in a config file; pass --{name} to accel launch"
                )
            close = difflib.get_close_matches(name, [k for k in KEYS if KEYS[k].in_file], n=1)
            hint = f"did you mean {close[0]}?" if close else "see `accel config show` for the keys"
            raise ConfigError(f"{origin}: unknown key {name!r}; {hint}")
        value = coerce(key, value, origin)
        if key.kind == "section":
            value = value or {}
        out[name] = value
    # the old top-level dynamo_backend moves into dynamo_config
    if "dynamo_backend" in out:
        backend = out.pop("dynamo_backend")
        dynamo = dict(out.get("dynamo_config") or {})
        if backend is not None:
            dynamo.setdefault("dynamo_backend", backend)
        out["dynamo_config"] = dynamo
    if out.get("dynamo_config"):
        out["dynamo_config"] = _validate_dynamo(out["dynamo_config"], origin)
    if out.get("compute_environment", "LOCAL_MACHINE") != "AMAZON_SAGEMAKER":
        stray = sorted(k for k in out if k in SAGEMAKER_KEYS)
        if stray:
            raise ConfigError(
                f"{origin}: {stray[0]}: only meaningful with compute_environment: AMAZON_SAGEMAKER; "
                "remove it or set compute_environment"
            )
    return out


def _validate_dynamo(section: Mapping[str, Any], origin: str) -> dict[str, Any]:
    out = {}
    for name, value in section.items():
        key = DYNAMO_KEYS.get(name)
        if key is None:
            close = difflib.get_close_matches(str(name), list(DYNAMO_KEYS), n=1)
            hint = f"did you mean {close[0]}?" if close else "allowed: " + ", ".join(DYNAMO_KEYS)
            raise ConfigError(f"{origin}: dynamo_config: unknown key {name!r}; {hint}")
        out[name] = coerce(key, value, f"{origin}: dynamo_config")
    return out


def load_config_file(path: str | os.PathLike, check_plugins: bool = True) -> dict[str, Any]:
    """Read and validate ``path``: core keys here, plugin sections through their plugins."""
    data = validate(read_config_file(path), str(path))
    if check_plugins:
        check_sections(data, str(path))
    return data


# --------------------------------------------------------------------------- plugins


def _loaded_plugin_distributions() -> set[str]:
    from ..plugins import list_plugins

    return {info.distribution for info in list_plugins() if info.distribution and not info.error}


def _plugin_error(package: str) -> str | None:
    from ..plugins import list_plugins

    for info in list_plugins():
        if info.distribution == package and info.error:
            return info.error
    return None


def require_plugin(name: str, feature: str, where: str = "") -> None:
    """Raise MissingPluginError when the package serving ``name`` (a distributed type,
    ``fp8`` or a section key) is not installed and loaded."""
    package = PROVIDERS.get(name) or SECTION_PROVIDERS.get(name)
    if package is None or not package.startswith("accel-"):
        return
    if package in _loaded_plugin_distributions():
        return
    failed = _plugin_error(package)
    extra = f" ({package} is installed but failed to load: {failed})" if failed else ""
    if not failed and installed_but_disabled(package):
        extra = f" ({package} is installed but not loaded: {disabled_by()})"
    prefix = f"{where}: " if where else ""
    raise MissingPluginError(f"{prefix}{feature}", package, extra)


def installed_but_disabled(package: str) -> bool:
    """Whether ``package`` is installed while ``ACCEL_PLUGINS`` / ``ACCEL_DISABLE_PLUGINS`` keep it out."""
    from importlib import metadata

    if disabled_by() is None:
        return False
    try:
        metadata.distribution(package)
    except metadata.PackageNotFoundError:
        return False
    return True


def disabled_by() -> str | None:
    """``ACCEL_PLUGINS=...`` / ``ACCEL_DISABLE_PLUGINS=...`` when either restricts loading."""
    for name in (environment.PLUGINS, environment.DISABLE_PLUGINS):
        value = environment.get_str(name)
        if value is not None and (name == environment.PLUGINS or value.strip()):
            return f"{name}={value}"
    return None


def _plugin_section_names() -> set[str]:
    try:
        return set(section_validators())
    except Exception:  # a broken plugin must not hide the real error
        return set()


def section_validators() -> dict[str, Callable[[dict], list[str]]]:
    """``{section_key: validator}`` from every plugin's ``accel_config_sections`` hook."""
    from ..plugins import hook

    table: dict[str, Callable[[dict], list[str]]] = {}
    for mapping in reversed(hook().accel_config_sections()):
        table.update(mapping or {})
    return table


def check_sections(data: Mapping[str, Any], origin: str = "<config>") -> None:
    """Run the owning plugin's validator on each non-empty plugin section.

    A non-empty section whose plugin is absent is an error naming the package.
    """
    validators = section_validators()
    for name in sorted(data):
        key = KEYS.get(name)
        section = data[name]
        is_section = (key is not None and key.kind == "section") or (
            key is None and isinstance(section, dict) and name in validators
        )
        if not is_section or name == "dynamo_config" or not section:
            continue
        if name == "ipex_config":
            continue  # deprecated and ignored, as in Accelerate
        validator = validators.get(name)
        if validator is None:
            package = SECTION_PROVIDERS.get(name, f"a plugin owning {name!r}")
            if package.startswith("accel-"):
                require_plugin(name, f"the {name} section", origin)
            raise ConfigError(
                f"{origin}: {name}: needs {package}, which is not installed; install it or remove the section"
            )
        try:
            problems = list(validator(dict(section)) or [])
        except Exception as exc:  # a validator must not crash the CLI
            problems = [f"validator failed: {type(exc).__name__}: {exc}"]
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise ConfigError(f"{origin}: {name}: {problems[0]}{more}")


# --------------------------------------------------------------------------- layered resolution


@dataclass
class ResolvedConfig:
    """Every setting with its value and where the value came from."""

    values: dict[str, Any]
    sources: dict[str, Source]
    """Source of each key; section entries as ``"section.key"``."""
    config_file: Path | None = None
    config_file_reason: str = ""
    notes: list[str] = field(default_factory=list)
    """Derivations worth telling the user (``distributed_type MULTI_CPU from --cpu``)."""

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` (``"section.key"`` reaches into a section)."""
        if "." in key:
            section, _, sub = key.partition(".")
            return (self.values.get(section) or {}).get(sub, default)
        return self.values.get(key, default)

    def source(self, key: str) -> Source:
        """Where ``key`` came from."""
        return self.sources.get(key, DEFAULT)

    def items(self) -> list[tuple[str, Any, Source]]:
        """Every setting, sections flattened to ``section.key``, sorted by name."""
        rows = []
        for name in sorted(self.values):
            value = self.values[name]
            if isinstance(value, dict) and (name.endswith("_config") or name in self.sections()):
                if not value:
                    rows.append((name, {}, self.source(name)))
                for sub in sorted(value):
                    full = f"{name}.{sub}"
                    rows.append((full, value[sub], self.sources.get(full, self.source(name))))
            else:
                rows.append((name, value, self.source(name)))
        return rows

    def sections(self) -> list[str]:
        """Names of the section-valued settings."""
        return [k for k, v in self.values.items() if isinstance(v, dict)]

    def to_file_dict(self) -> dict[str, Any]:
        """The settings a config file may hold (what ``accel config`` writes)."""
        return {
            k: v
            for k, v in self.values.items()
            if (KEYS.get(k) is None or KEYS[k].in_file) and k != "dynamo_backend"
        }

    def to_json(self) -> str:
        """The values as JSON (what workers receive in ``ACCEL_LAUNCH_CONFIG``)."""
        return json.dumps(
            {k: v for k, v in self.values.items() if v is not None}, sort_keys=True, default=str
        )


def resolve(
    flags: Mapping[str, Any] | None = None,
    config_file: str | os.PathLike | None = None,
    environ: Mapping[str, str] | None = None,
    use_config_file: bool = True,
    check_plugins: bool = True,
    flag_labels: Mapping[str, str] | None = None,
) -> ResolvedConfig:
    """Merge default < config file < environment < flags, recording each value's source.

    ``flags`` maps setting names to values given on the command line (None means
    "not given"); ``"section.key"`` names set a key inside a section; ``flag_labels``
    maps a name to the flag the user typed (``use_cpu`` -> ``--cpu``). ``environ``
    defaults to ``os.environ``. Impossible combinations raise ConfigError;
    a plugin-only feature whose plugin is absent raises MissingPluginError.
    """
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    for key in _KEYS:
        if key.name == "dynamo_backend":
            continue
        values[key.name] = dict(key.default or {}) if key.kind == "section" else _copy(key.default)
        sources[key.name] = DEFAULT
    values["dynamo_config"] = {}
    for sub in DYNAMO_KEYS.values():
        values["dynamo_config"][sub.name] = sub.default
        sources[f"dynamo_config.{sub.name}"] = DEFAULT

    # file
    path, reason = (None, "not used")
    if use_config_file:
        path, reason = _find_with_environ(config_file, environ)
        if path is not None:
            data = load_config_file(path, check_plugins=False)
            file_source = Source("file", str(path))
            for name, value in data.items():
                if isinstance(value, dict) and (name not in KEYS or KEYS[name].kind == "section"):
                    merged = dict(values.get(name) or {})
                    merged.update(value)
                    values[name] = merged
                    sources[name] = file_source
                    for sub in value:
                        sources[f"{name}.{sub}"] = file_source
                else:
                    values[name] = value
                    sources[name] = file_source

    # environment
    for key in list(_KEYS) + [k for k in DYNAMO_KEYS.values()]:
        if not key.env:
            continue
        raw = environ.get(key.env)
        if raw is None or raw == "":
            continue
        value = coerce(key, raw, f"environment variable {key.env}")
        env_source = Source("env", key.env)
        if key.name in DYNAMO_KEYS and DYNAMO_KEYS[key.name] is key:
            values["dynamo_config"][key.name] = value
            sources[f"dynamo_config.{key.name}"] = env_source
        else:
            values[key.name] = value
            sources[key.name] = env_source

    # flags
    for name, value in (flags or {}).items():
        if value is None:
            continue
        label = (flag_labels or {}).get(name) or "--" + name.rpartition(".")[2]
        flag_source = Source("flag", label)
        if "." in name:
            section, _, sub = name.partition(".")
            if section == "dynamo_config" and sub in DYNAMO_KEYS:
                value = coerce(DYNAMO_KEYS[sub], value, f"--{sub}")
            values.setdefault(section, {})
            if not isinstance(values[section], dict):
                values[section] = {}
            values[section][sub] = value
            sources[f"{section}.{sub}"] = flag_source
            continue
        key = KEYS.get(name)
        if key is None:
            values[name] = value  # a plugin flag outside any section: kept as given
            sources[name] = flag_source
            continue
        values[name] = coerce(key, value, f"--{name}")
        sources[name] = flag_source

    resolved = ResolvedConfig(values, sources, path, reason)
    _derive(resolved)
    if check_plugins:
        for name, value in values.items():
            if isinstance(value, dict) and value and name != "dynamo_config":
                kinds = {src.kind for k, src in sources.items() if k.startswith(name + ".")}
                where = [str(path)] if path and ("file" in kinds or not kinds) else []
                if "flag" in kinds:
                    where.append("command line")
                check_sections({name: value}, " + ".join(where) or "<config>")
        _check_plugins(resolved)
    return resolved


def _copy(value: Any) -> Any:
    return list(value) if isinstance(value, list) else value


def _find_with_environ(
    explicit: str | os.PathLike | None, environ: Mapping[str, str]
) -> tuple[Path | None, str]:
    if explicit:
        return Path(explicit).expanduser(), "flag --config_file"
    from_env = environ.get(environment.CONFIG_FILE)
    if from_env:
        return Path(from_env).expanduser(), f"env {environment.CONFIG_FILE}"
    default = default_config_file()
    if default.is_file():
        return default, "default location"
    return None, f"no file at {default}"


def _where(resolved: ResolvedConfig, key: str) -> str:
    """``key value (source)``, e.g. ``num_processes 3 (file c.yaml)``."""
    source = resolved.source(key)
    value = resolved.values.get(key)
    shown = f"{key} {value}"
    return shown if source.kind == "default" else f"{shown} ({source})"


def _derive(resolved: ResolvedConfig) -> None:
    """Fill in what follows from the other settings and reject contradictions."""
    v, src = resolved.values, resolved.sources
    dtype = v.get("distributed_type")
    machines = v["num_machines"]
    if v["machine_rank"] >= machines:
        raise ConfigError(
            f"{_where(resolved, 'machine_rank')} needs num_machines > {v['machine_rank']} "
            f"but {_where(resolved, 'num_machines')}; ranks go from 0 to num_machines - 1"
        )
    # --cpu against a GPU distributed type: the higher layer wins, equal layers contradict
    if v["use_cpu"] and dtype in MULTI_DEVICE_TYPES and dtype != "MULTI_CPU":
        s_cpu, s_type = resolved.source("use_cpu"), resolved.source("distributed_type")
        if s_cpu.rank == s_type.rank:
            raise ConfigError(
                f"{_where(resolved, 'use_cpu')} contradicts "
                f"{_where(resolved, 'distributed_type')}: use --cpu or --multi_gpu, not both"
            )
        if s_cpu.rank > s_type.rank:
            v["distributed_type"] = dtype = "MULTI_CPU"
            src["distributed_type"] = Source("derived", f"from use_cpu ({s_cpu})")
        else:
            v["use_cpu"] = False
            src["use_cpu"] = Source("derived", f"from distributed_type {dtype} ({s_type})")
    nproc = v.get("nproc_per_node")
    total = v["num_processes"]
    if nproc is not None:
        if total != nproc * machines and v["rdzv_backend"] == "static":
            s_num, s_np = resolved.source("num_processes"), resolved.source("nproc_per_node")
            if s_num.rank >= s_np.rank:
                raise ConfigError(
                    f"nproc_per_node {nproc} on {machines} machine(s) makes {nproc * machines} "
                    f"processes but num_processes is {total} ({s_num}); give only one of them, "
                    "or use rdzv_backend c10d for machines with different process counts"
                )
            v["num_processes"] = total = nproc * machines
            src["num_processes"] = Source("derived", "from nproc_per_node x num_machines")
        # with c10d, machines may run different numbers of processes: num_processes stays the total
    elif machines > 1 and resolved.source("num_processes").kind == "default":
        v["num_processes"] = total = machines
        src["num_processes"] = Source("derived", "one process per machine")
        v["nproc_per_node"] = 1
        src["nproc_per_node"] = Source("derived", "one process per machine")
    elif total % machines != 0:
        raise ConfigError(
            f"{_where(resolved, 'num_processes')} is the total over {machines} machines "
            "and must be divisible by num_machines; or give --nproc_per_node for each machine"
        )
    else:
        v["nproc_per_node"] = total // machines
        src["nproc_per_node"] = Source("derived", "from num_processes / num_machines")
    multi = total > 1 or machines > 1
    if dtype is None:
        if multi:
            if v["use_cpu"]:
                guess = "MULTI_CPU"
                why = "num_processes > 1 with use_cpu"
            else:
                guess = "MULTI_GPU" if _has_cuda_hint() else "MULTI_CPU"
                why = f"num_processes > 1 ({'GPUs visible' if guess == 'MULTI_GPU' else 'no GPU seen'})"
            v["distributed_type"] = guess
            src["distributed_type"] = Source("derived", why)
        else:
            v["distributed_type"] = "NO"
            src["distributed_type"] = Source("derived", "one process")
    elif dtype == "NO" and multi:
        s_type, s_num = resolved.source("distributed_type"), resolved.source("num_processes")
        if s_type.rank >= s_num.rank and machines == 1:
            raise ConfigError(
                f"{_where(resolved, 'distributed_type')} runs one process but "
                f"{_where(resolved, 'num_processes')}; set distributed_type MULTI_CPU or "
                "MULTI_GPU, or num_processes 1"
            )
        guess = "MULTI_CPU" if v["use_cpu"] or not _has_cuda_hint() else "MULTI_GPU"
        v["distributed_type"] = guess
        src["distributed_type"] = Source("derived", f"from num_processes {total} ({s_num})")
    if machines > 1 and not v.get("main_process_ip"):
        raise ConfigError(
            f"num_machines {machines} needs main_process_ip (the address of machine 0): "
            "pass --main_process_ip or set main_process_ip in the config file"
        )
    if v["compute_environment"] == "AMAZON_SAGEMAKER":
        resolved.notes.append(
            "compute_environment AMAZON_SAGEMAKER: accel launch runs LOCAL_MACHINE jobs only"
        )
    # sections whose distributed type is not selected are ignored: say so once
    for section, owner in SECTION_DISTRIBUTED_TYPE.items():
        if v.get(section) and v["distributed_type"] != owner:
            resolved.notes.append(
                f"{section} is set but distributed_type is {v['distributed_type']}: it is ignored"
            )


def _has_cuda_hint() -> bool:
    """Whether GPUs look present, without importing torch."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        return bool(torch.cuda.is_available())
    return Path("/proc/driver/nvidia/gpus").is_dir() and any(
        Path("/proc/driver/nvidia/gpus").iterdir()
    )


def _check_plugins(resolved: ResolvedConfig) -> None:
    dtype = resolved.values.get("distributed_type")
    if dtype in PROVIDERS:
        require_plugin(dtype, _where(resolved, "distributed_type"))
    if resolved.values.get("mixed_precision") == "fp8":
        require_plugin("fp8", _where(resolved, "mixed_precision"))


# --------------------------------------------------------------------------- writing


def save_config_file(data: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Write ``data`` to ``path``: JSON when it ends in ``.json``, YAML otherwise."""
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    clean = {
        k: v
        for k, v in data.items()
        if v is not None or k in ("main_process_ip", "main_process_port")
    }
    if path.suffix.lower() == ".json":
        path.write_text(json.dumps(clean, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    else:
        import yaml

        path.write_text(yaml.safe_dump(clean, sort_keys=True), encoding="utf-8")
    return path


def basic_config(mixed_precision: str = "no") -> dict[str, Any]:
    """The config :func:`write_basic_config` writes for this machine's devices."""
    precision = coerce(KEYS["mixed_precision"], mixed_precision, "write_basic_config")
    config: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "debug": False,
        "distributed_type": "NO",
        "downcast_bf16": "no",
        "enable_cpu_affinity": False,
        "machine_rank": 0,
        "main_training_function": "main",
        "mixed_precision": precision,
        "num_machines": 1,
        "num_processes": 1,
        "rdzv_backend": "static",
        "same_network": True,
        "tpu_env": [],
        "tpu_use_cluster": False,
        "tpu_use_sudo": False,
        "use_cpu": False,
    }
    kind, count = _count_devices()
    if count > 0:
        config["gpu_ids"] = "all"
        config["num_processes"] = count
        if count > 1:
            config["distributed_type"] = {"cuda": "MULTI_GPU"}.get(kind, f"MULTI_{kind.upper()}")
    else:
        config["use_cpu"] = True
    return config


def _count_devices() -> tuple[str, int]:
    import torch  # imported here only: this module must stay torch-free at import

    if torch.cuda.is_available():
        return "cuda", torch.cuda.device_count()
    for kind in ("xpu", "npu", "mlu", "musa", "hpu"):
        module = getattr(torch, kind, None)
        try:
            if module is not None and module.is_available():
                return kind, module.device_count()
        except Exception:  # a half-installed vendor extension
            continue
    return "cpu", 0


def write_basic_config(
    mixed_precision: str = "no", save_location: str | os.PathLike | None = None
) -> Path | bool:
    """Write a config for all of this machine's GPUs (or the CPU) with ``mixed_precision``.

    Writes to ``save_location`` (default: :func:`default_config_file`), YAML unless the
    name ends in ``.json``. An existing file is left alone and False is returned;
    otherwise the path written.
    """
    path = Path(save_location).expanduser() if save_location else default_config_file()
    if path.exists():
        print(
            f"Configuration already exists at {path}, will not override. "
            "Run `accel config` manually or pass a different `save_location`."
        )
        return False
    return save_config_file(basic_config(mixed_precision), path)


# --------------------------------------------------------------------------- workers


def launched_config() -> dict[str, Any]:
    """In a process started by ``accel launch``: the resolved settings (``ACCEL_LAUNCH_CONFIG``).

    Plugins read their section here (``launched_config().get("fsdp_config", {})``).
    Empty outside ``accel launch``.
    """
    raw = environment.get_str(environment.LAUNCH_CONFIG)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        raise ConfigError(
            f"environment variable {environment.LAUNCH_CONFIG} is not valid JSON; "
            "it is set by accel launch, unset it"
        ) from None
    return data if isinstance(data, dict) else {}


__all__ = [
    "CONFIG_FILE_NAME",
    "KEYS",
    "Key",
    "ResolvedConfig",
    "Source",
    "basic_config",
    "check_sections",
    "coerce",
    "default_config_dir",
    "default_config_file",
    "find_config_file",
    "launched_config",
    "load_config_file",
    "read_config_file",
    "require_plugin",
    "resolve",
    "save_config_file",
    "section_validators",
    "validate",
    "write_basic_config",
]
