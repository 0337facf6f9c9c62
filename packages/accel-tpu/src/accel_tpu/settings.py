"""What ``distributed_type: XLA`` launches need, shared by the launchers and ``notebook_launcher``.

:func:`check_xla_config` rejects settings XLA cannot run (:func:`check_precision` the
precisions, by their fields); :func:`xla_environment` gives the variables the XLA runtime reads
at start-up. Imports neither torch nor torch_xla at import time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, SupportsInt, cast

from accel.config.core_options import KEYS
from accel.errors import ConfigError

from . import pod

if TYPE_CHECKING:
    from accel.precision import Precision

XLA_TYPES = ("XLA", "TPU")
"""``distributed_type`` values the XLA launchers serve."""


def launch_count(config: Mapping[str, object], key: str) -> int:
    """A counting setting of the launch configuration (``num_processes``, ``num_machines``:
    declared whole numbers), 1 when unset."""
    return int(cast("SupportsInt | str", config.get(key) or 1))


def tpu_env_entries(config: Mapping[str, object]) -> list[str]:
    """The ``tpu_env`` entries of the launch configuration (``NAME=value`` each), checked."""
    return pod.check_env_entries(cast("Iterable[str] | None", config.get("tpu_env")))


def is_xla(config: Mapping[str, object]) -> bool:
    """Whether ``config`` asks for ``distributed_type: XLA`` (or its old name ``TPU``)."""
    return str(config.get("distributed_type") or "").upper() in XLA_TYPES


def downcast_bf16(config: Mapping[str, object]) -> bool:
    """``downcast_bf16`` as a boolean (``yes`` / ``no``), checked by its declaration."""
    return KEYS["downcast_bf16"].convert(config.get("downcast_bf16") or "no") == "yes"


def check_xla_config(config: Mapping[str, object]) -> None:
    """Reject settings XLA cannot run, naming the key and what to do."""
    if config.get("no_python"):
        raise ConfigError("--no_python cannot be used with --tpu: the script must be Python")
    if launch_count(config, "num_machines") > 1 and not config.get("tpu_use_cluster"):
        raise ConfigError(
            "num_machines > 1 with distributed_type XLA: a TPU pod is launched on all its "
            "workers at once; use --tpu_cluster (tpu_use_cluster: true) with tpu_name and tpu_zone"
        )
    name = str(config.get("mixed_precision") or "no")
    if name != "no":  # full precision always runs; another is judged by its class (imports torch)
        from accel.plugins import registry

        check_precision(registry.get_precision(name))
    function = config.get("main_training_function") or "main"
    if not str(function).isidentifier():
        raise ConfigError(f"main_training_function {function!r} is not a Python function name")
    downcast_bf16(config)
    tpu_env_entries(config)


def check_precision(precision: Precision | type) -> None:
    """Refuse a :class:`~accel.precision.Precision` (instance or class) XLA devices cannot run,
    judged by its fields: full precision and bf16 autocast run; fp16 (its loss scaler has no
    XLA counterpart) and FP8 layers do not."""
    import torch

    # a Precision or a registered Precision class (the registry types its classes as ``type``)
    precision = cast("Precision | type[Precision]", precision)
    if precision.fp8 or precision.dtype not in (None, torch.bfloat16):
        name = precision.names[0] if isinstance(precision, type) else precision.name
        raise ConfigError(
            f"mixed_precision {name} is not supported on XLA devices: use bf16 (or no); "
            "set downcast_bf16: yes to also run float32 as bfloat16"
        )


def xla_environment(config: Mapping[str, object]) -> dict[str, str]:
    """Variables the XLA runtime reads at start-up: bf16 downcasting, ``tpu_env``, CPU devices."""
    env: dict[str, str] = {}
    if downcast_bf16(config):
        # float32 runs as bfloat16 (and float64 as float32) on the device
        env.update(XLA_USE_BF16="0", XLA_DOWNCAST_BF16="1")
    for entry in tpu_env_entries(config):
        name, _, value = entry.partition("=")
        env[name] = value
    count = launch_count(config, "num_processes")
    if os.environ.get("PJRT_DEVICE", "").upper() == "CPU" and "CPU_NUM_DEVICES" not in os.environ:
        # PJRT's CPU devices stand in for TPU cores (testing): one per requested process
        env["CPU_NUM_DEVICES"] = str(count)
    return env


__all__ = [
    "XLA_TYPES",
    "check_precision",
    "check_xla_config",
    "downcast_bf16",
    "is_xla",
    "xla_environment",
]
