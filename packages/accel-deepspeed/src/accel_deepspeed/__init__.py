"""accel-deepspeed: DeepSpeed ZeRO 0-3 with offload, ``auto`` config filling and multi-node launchers.

Importing this package does not import torch or DeepSpeed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports

if TYPE_CHECKING:  # what type checkers and editors follow; at run time names load on first use
    from accel_deepspeed.config import DeepSpeedPlugin as DeepSpeedPlugin
    from accel_deepspeed.dummy import DummyOptim as DummyOptim
    from accel_deepspeed.dummy import DummyScheduler as DummyScheduler
    from accel_deepspeed.fp32 import (
        convert_zero_checkpoint_to_fp32_state_dict as convert_zero_checkpoint_to_fp32_state_dict,
    )
    from accel_deepspeed.fp32 import (
        get_fp32_state_dict_from_zero_checkpoint as get_fp32_state_dict_from_zero_checkpoint,
    )
    from accel_deepspeed.fp32 import (
        load_state_dict_from_zero_checkpoint as load_state_dict_from_zero_checkpoint,
    )
    from accel_deepspeed.hf_config import HfDeepSpeedConfig as HfDeepSpeedConfig
    from accel_deepspeed.sequence_parallel import sequence_parallel_group as sequence_parallel_group
    from accel_deepspeed.sequence_parallel import sequence_parallel_loss as sequence_parallel_loss
    from accel_deepspeed.wrappers import DeepSpeedEngineWrapper as DeepSpeedEngineWrapper
    from accel_deepspeed.wrappers import DeepSpeedOptimizerWrapper as DeepSpeedOptimizerWrapper
    from accel_deepspeed.wrappers import DeepSpeedSchedulerWrapper as DeepSpeedSchedulerWrapper

_NAMES = {
    "DeepSpeedPlugin": "accel_deepspeed.config",
    "DummyOptim": "accel_deepspeed.dummy",
    "DummyScheduler": "accel_deepspeed.dummy",
    "HfDeepSpeedConfig": "accel_deepspeed.hf_config",
    "DeepSpeedEngineWrapper": "accel_deepspeed.wrappers",
    "DeepSpeedOptimizerWrapper": "accel_deepspeed.wrappers",
    "DeepSpeedSchedulerWrapper": "accel_deepspeed.wrappers",
    "convert_zero_checkpoint_to_fp32_state_dict": "accel_deepspeed.fp32",
    "get_fp32_state_dict_from_zero_checkpoint": "accel_deepspeed.fp32",
    "load_state_dict_from_zero_checkpoint": "accel_deepspeed.fp32",
    "sequence_parallel_group": "accel_deepspeed.sequence_parallel",
    "sequence_parallel_loss": "accel_deepspeed.sequence_parallel",
}
"""Public names and the module defining each, imported on first use (the wrappers, fp32 and
sequence-parallel modules import torch)."""

__all__ = list(_NAMES)

__getattr__, __dir__ = exports(__name__, _NAMES)
