"""``accelerate.commands.config.config_args``: Accelerate's module of loaded configurations.

:func:`load_config_from_file` reads a config file with accel's reader (so accel's own keys
and plugins' sections load too) and returns a :class:`ClusterConfig` (or a
:class:`SageMakerConfig` for ``compute_environment: AMAZON_SAGEMAKER``): dataclasses with
Accelerate's field names and defaults (``fsdp_config`` is ``{}`` when absent, ...). A key
accel knows that is not a field (``ray_config``, ``slurm_config``, ...) reads as an attribute
too; any other name raises ``AttributeError``.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from accel.config.files import (
    CONFIG_FILE_NAME,
    JSON_CONFIG_FILE_NAME,
    default_config_dir,
    load_config_file,
)
from accel.config.files import default_config_file as _default_location

if TYPE_CHECKING:
    from accel.types import ComputeEnvironment, DistributedType

_Enum = TypeVar("_Enum", bound=Enum)

cache_dir = str(default_config_dir())
"""The folder of the default config file (accel's: ``$HF_HOME/accel``, ...)."""
hf_cache_home = os.path.dirname(cache_dir)
default_yaml_config_file = os.path.join(cache_dir, CONFIG_FILE_NAME)
default_json_config_file = os.path.join(cache_dir, JSON_CONFIG_FILE_NAME)
default_config_file = str(_default_location())
"""The default configuration file (``accelerate config`` / ``accel config`` writes it)."""


def load_config_from_file(config_file: str | os.PathLike | None = None) -> BaseConfig:
    """The settings of ``config_file`` (None: the default file), as a :class:`ClusterConfig`.

    A :class:`SageMakerConfig` for ``compute_environment: AMAZON_SAGEMAKER``. Raises
    ``FileNotFoundError`` when the file does not exist, as Accelerate does.
    """
    path = str(config_file) if config_file is not None else str(_default_location())
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"the config file {path} does not exist: pass an existing file, or create the "
            "default one with `accelerate config`"
        )
    settings = load_config_file(path, check_plugins=False)
    if settings.get("compute_environment") == "AMAZON_SAGEMAKER":
        return SageMakerConfig.from_settings(settings)
    return ClusterConfig.from_settings(settings)


def _enum(enum_class: type[_Enum], value: _Enum | str) -> _Enum | str:
    if isinstance(value, str):
        try:
            return enum_class(value)
        except ValueError:  # a plugin's type, served by plain string
            return value
    return value


def _plain(value: object) -> object:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass
class BaseConfig:
    """The settings every configuration has; see :class:`ClusterConfig`."""

    compute_environment: ComputeEnvironment | str
    distributed_type: DistributedType | str
    mixed_precision: str | None
    use_cpu: bool
    debug: bool

    def __post_init__(self) -> None:
        from accel.types import ComputeEnvironment, DistributedType

        self.compute_environment = _enum(ComputeEnvironment, self.compute_environment)
        if self.compute_environment != ComputeEnvironment.AMAZON_SAGEMAKER:
            self.distributed_type = _enum(DistributedType, self.distributed_type)
        if getattr(self, "dynamo_config", None) is None:
            self.dynamo_config = {}

    # ------------------------------------------------------------------ accel's other keys

    def __getattr__(self, name: str) -> Any:
        """A key of accel's config that is not a field: its value in the file, else its default."""
        if not name.startswith("_"):
            extra = self.__dict__.get("_accel_settings", {})
            if name in extra:
                return extra[name]
            from accel.config.core_options import KEYS

            key = KEYS.get(name)
            if key is not None and key.in_file:
                return {} if key.kind == "section" else copy.deepcopy(key.default)
            known = [f.name for f in fields(self)] + [k for k in KEYS if KEYS[k].in_file]
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}{hint}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @classmethod
    def from_settings(cls, settings: Mapping[str, object]) -> BaseConfig:
        """A configuration from a mapping of settings (accel's keys welcome)."""
        # a config file's values, as accel's reader typed them: each fits the field it fills
        values: dict[str, Any] = cls.process_config(dict(settings))
        names = {f.name for f in fields(cls)}
        config = cls(**{k: v for k, v in values.items() if k in names})
        config.__dict__["_accel_settings"] = {k: v for k, v in values.items() if k not in names}
        return config

    @staticmethod
    def process_config(config_dict: dict[str, object]) -> dict[str, object]:
        """Fill what Accelerate fills when a file leaves it out."""
        config_dict.setdefault("compute_environment", "LOCAL_MACHINE")
        config_dict.setdefault("distributed_type", "NO")
        if config_dict["distributed_type"] == "NO":
            config_dict.setdefault("num_processes", 1)
        config_dict.setdefault("mixed_precision", None)
        if "dynamo_backend" in config_dict:
            backend = config_dict.pop("dynamo_backend")
            config_dict["dynamo_config"] = {} if backend == "NO" else {"dynamo_backend": backend}
        config_dict.setdefault("use_cpu", False)
        config_dict.setdefault("debug", False)
        config_dict.setdefault("enable_cpu_affinity", False)
        return config_dict

    def to_dict(self) -> dict[str, object]:
        """The settings as plain values (enums as strings), without None or empty sections."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(self.__dict__.get("_accel_settings", {}))
        result = {k: _plain(v) for k, v in values.items()}
        return {k: v for k, v in result.items() if v is not None and v != {}}

    @classmethod
    def from_yaml_file(cls, yaml_file: str | os.PathLike | None = None) -> BaseConfig:
        """Read a YAML config file (default: the default YAML file)."""
        path = default_yaml_config_file if yaml_file is None else yaml_file
        return cls.from_settings(load_config_file(path, check_plugins=False))

    @classmethod
    def from_json_file(cls, json_file: str | os.PathLike | None = None) -> BaseConfig:
        """Read a JSON config file (default: the default JSON file)."""
        path = default_json_config_file if json_file is None else json_file
        return cls.from_settings(load_config_file(path, check_plugins=False))

    def to_yaml_file(self, yaml_file: str | os.PathLike) -> None:
        """Write :meth:`to_dict` as YAML."""
        import yaml

        with open(yaml_file, "w", encoding="utf-8") as f:
            yaml.safe_dump(self.to_dict(), f)

    def to_json_file(self, json_file: str | os.PathLike) -> None:
        """Write :meth:`to_dict` as JSON."""
        with open(json_file, "w", encoding="utf-8") as f:
            f.write(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")


@dataclass
class ClusterConfig(BaseConfig):
    """A local or cluster configuration, with Accelerate's fields and defaults."""

    num_processes: int = -1
    machine_rank: int = 0
    num_machines: int = 1
    gpu_ids: str | None = None
    main_process_ip: str | None = None
    main_process_port: int | None = None
    rdzv_backend: str | None = "static"
    same_network: bool | None = False
    main_training_function: str = "main"
    enable_cpu_affinity: bool = False
    fp8_config: dict | None = None
    deepspeed_config: dict | None = None
    fsdp_config: dict | None = None
    parallelism_config: dict | None = None
    megatron_lm_config: dict | None = None
    mpirun_config: dict | None = None
    downcast_bf16: bool | str = False
    tpu_name: str | None = None
    tpu_zone: str | None = None
    tpu_use_cluster: bool = False
    tpu_use_sudo: bool = False
    command_file: str | None = None
    commands: list[str] | None = None
    tpu_vm: list[str] | None = None
    tpu_env: list[str] | None = None
    dynamo_config: dict | None = None

    def __post_init__(self) -> None:
        for name in (
            "deepspeed_config",
            "fsdp_config",
            "megatron_lm_config",
            "mpirun_config",
            "fp8_config",
            "parallelism_config",
        ):
            if getattr(self, name) is None:
                setattr(self, name, {})
        super().__post_init__()


@dataclass
class SageMakerConfig(BaseConfig):
    """An Amazon SageMaker configuration (``compute_environment: AMAZON_SAGEMAKER``)."""

    ec2_instance_type: str | None = None
    iam_role_name: str | None = None
    image_uri: str | None = None
    profile: str | None = None
    region: str = "us-east-1"
    num_machines: int = 1
    gpu_ids: str = "all"
    base_job_name: str = "accelerate-sagemaker-1"
    pytorch_version: str | None = None
    transformers_version: str | None = None
    py_version: str | None = None
    sagemaker_inputs_file: str | None = None
    sagemaker_metrics_file: str | None = None
    additional_args: dict | None = None
    dynamo_config: dict | None = None
    enable_cpu_affinity: bool = False


__all__ = [
    "BaseConfig",
    "ClusterConfig",
    "SageMakerConfig",
    "cache_dir",
    "default_config_file",
    "default_json_config_file",
    "default_yaml_config_file",
    "hf_cache_home",
    "load_config_from_file",
]
