"""accel-fsdp: Fully Sharded Data Parallel for accel (FSDP2 ``fully_shard`` by default, FSDP1 supported)."""

from __future__ import annotations

from .checkpointing import (
    load_fsdp_model,
    load_fsdp_optimizer,
    save_fsdp_model,
    save_fsdp_optimizer,
)
from .config import (
    FullyShardedDataParallelPlugin,
    disable_fsdp_ram_efficient_loading,
    enable_fsdp_ram_efficient_loading,
)
from .constants import (
    FSDP2_PYTORCH_VERSION,
    FSDP2_STATE_DICT_TYPE,
    FSDP_AUTO_WRAP_POLICY,
    FSDP_BACKWARD_PREFETCH,
    FSDP_MODEL_NAME,
    FSDP_PYTORCH_VERSION,
    FSDP_SHARDING_STRATEGY,
    FSDP_STATE_DICT_TYPE,
)
from .merge import merge_fsdp_weights
from .wrap import get_module_class_from_name, get_parameters_from_modules

__all__ = [
    "FSDP2_PYTORCH_VERSION",
    "FSDP2_STATE_DICT_TYPE",
    "FSDP_AUTO_WRAP_POLICY",
    "FSDP_BACKWARD_PREFETCH",
    "FSDP_MODEL_NAME",
    "FSDP_PYTORCH_VERSION",
    "FSDP_SHARDING_STRATEGY",
    "FSDP_STATE_DICT_TYPE",
    "FullyShardedDataParallelPlugin",
    "disable_fsdp_ram_efficient_loading",
    "enable_fsdp_ram_efficient_loading",
    "get_module_class_from_name",
    "get_parameters_from_modules",
    "load_fsdp_model",
    "load_fsdp_optimizer",
    "merge_fsdp_weights",
    "save_fsdp_model",
    "save_fsdp_optimizer",
]
