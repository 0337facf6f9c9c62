"""accel-fsdp: Fully Sharded Data Parallel for accel (FSDP2 ``fully_shard`` by default, FSDP1 supported).

Names are imported on first use, so registering the plugin (``accel_fsdp.plugin``) stays
free of torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports

if TYPE_CHECKING:  # what type checkers and editors follow; at run time names load on first use
    from accel_fsdp.checkpointing import load_fsdp_model as load_fsdp_model
    from accel_fsdp.checkpointing import load_fsdp_optimizer as load_fsdp_optimizer
    from accel_fsdp.checkpointing import save_fsdp_model as save_fsdp_model
    from accel_fsdp.checkpointing import save_fsdp_optimizer as save_fsdp_optimizer
    from accel_fsdp.config import FullyShardedDataParallelPlugin as FullyShardedDataParallelPlugin
    from accel_fsdp.config import (
        disable_fsdp_ram_efficient_loading as disable_fsdp_ram_efficient_loading,
    )
    from accel_fsdp.config import (
        enable_fsdp_ram_efficient_loading as enable_fsdp_ram_efficient_loading,
    )
    from accel_fsdp.constants import FSDP2_PYTORCH_VERSION as FSDP2_PYTORCH_VERSION
    from accel_fsdp.constants import FSDP2_STATE_DICT_TYPE as FSDP2_STATE_DICT_TYPE
    from accel_fsdp.constants import FSDP_AUTO_WRAP_POLICY as FSDP_AUTO_WRAP_POLICY
    from accel_fsdp.constants import FSDP_BACKWARD_PREFETCH as FSDP_BACKWARD_PREFETCH
    from accel_fsdp.constants import FSDP_MODEL_NAME as FSDP_MODEL_NAME
    from accel_fsdp.constants import FSDP_PYTORCH_VERSION as FSDP_PYTORCH_VERSION
    from accel_fsdp.constants import FSDP_SHARDING_STRATEGY as FSDP_SHARDING_STRATEGY
    from accel_fsdp.constants import FSDP_STATE_DICT_TYPE as FSDP_STATE_DICT_TYPE
    from accel_fsdp.merge import merge_fsdp_weights as merge_fsdp_weights
    from accel_fsdp.wrap import get_module_class_from_name as get_module_class_from_name
    from accel_fsdp.wrap import get_parameters_from_modules as get_parameters_from_modules

_NAMES = {
    "FullyShardedDataParallelPlugin": "accel_fsdp.config",
    "enable_fsdp_ram_efficient_loading": "accel_fsdp.config",
    "disable_fsdp_ram_efficient_loading": "accel_fsdp.config",
    "merge_fsdp_weights": "accel_fsdp.merge",
    "save_fsdp_model": "accel_fsdp.checkpointing",
    "load_fsdp_model": "accel_fsdp.checkpointing",
    "save_fsdp_optimizer": "accel_fsdp.checkpointing",
    "load_fsdp_optimizer": "accel_fsdp.checkpointing",
    "get_module_class_from_name": "accel_fsdp.wrap",
    "get_parameters_from_modules": "accel_fsdp.wrap",
    "FSDP2_PYTORCH_VERSION": "accel_fsdp.constants",
    "FSDP2_STATE_DICT_TYPE": "accel_fsdp.constants",
    "FSDP_AUTO_WRAP_POLICY": "accel_fsdp.constants",
    "FSDP_BACKWARD_PREFETCH": "accel_fsdp.constants",
    "FSDP_MODEL_NAME": "accel_fsdp.constants",
    "FSDP_PYTORCH_VERSION": "accel_fsdp.constants",
    "FSDP_SHARDING_STRATEGY": "accel_fsdp.constants",
    "FSDP_STATE_DICT_TYPE": "accel_fsdp.constants",
}
"""Public names and the module defining each, imported on first use."""

__all__ = sorted(_NAMES)

__getattr__, __dir__ = exports(__name__, _NAMES)
