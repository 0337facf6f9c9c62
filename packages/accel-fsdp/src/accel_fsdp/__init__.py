"""accel-fsdp: Fully Sharded Data Parallel for accel (FSDP2 ``fully_shard`` by default, FSDP1 supported).

Names are imported on first use, so registering the plugin (``accel_fsdp.plugin``) stays
free of torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES: dict[str, str] = {
    "FullyShardedDataParallelPlugin": "config",
    "enable_fsdp_ram_efficient_loading": "config",
    "disable_fsdp_ram_efficient_loading": "config",
    "merge_fsdp_weights": "merge",
    "save_fsdp_model": "checkpointing",
    "load_fsdp_model": "checkpointing",
    "save_fsdp_optimizer": "checkpointing",
    "load_fsdp_optimizer": "checkpointing",
    "get_module_class_from_name": "wrap",
    "get_parameters_from_modules": "wrap",
    "FSDP2_PYTORCH_VERSION": "constants",
    "FSDP2_STATE_DICT_TYPE": "constants",
    "FSDP_AUTO_WRAP_POLICY": "constants",
    "FSDP_BACKWARD_PREFETCH": "constants",
    "FSDP_MODEL_NAME": "constants",
    "FSDP_PYTORCH_VERSION": "constants",
    "FSDP_SHARDING_STRATEGY": "constants",
    "FSDP_STATE_DICT_TYPE": "constants",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'accel_fsdp' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_NAMES))
