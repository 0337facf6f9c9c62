"""accel-deepspeed: DeepSpeed ZeRO 0-3 with offload, ``auto`` config filling and multi-node launchers.

Importing this package does not import torch or DeepSpeed.
"""

from __future__ import annotations

_LIGHT = {
    "DeepSpeedPlugin": "config",
    "DummyOptim": "dummy",
    "DummyScheduler": "dummy",
    "HfDeepSpeedConfig": "hf_config",
}
"""Torch-free names, loaded on first use too (``accel launch`` imports the plugin module only)."""

__all__ = [
    "DeepSpeedPlugin",
    "DummyOptim",
    "DummyScheduler",
    "HfDeepSpeedConfig",
    "DeepSpeedEngineWrapper",
    "DeepSpeedOptimizerWrapper",
    "DeepSpeedSchedulerWrapper",
    "convert_zero_checkpoint_to_fp32_state_dict",
    "get_fp32_state_dict_from_zero_checkpoint",
    "load_state_dict_from_zero_checkpoint",
    "sequence_parallel_group",
    "sequence_parallel_loss",
]

_SEQUENCE_PARALLEL = {"sequence_parallel_group", "sequence_parallel_loss"}
_WRAPPERS = {"DeepSpeedEngineWrapper", "DeepSpeedOptimizerWrapper", "DeepSpeedSchedulerWrapper"}
_FP32 = {
    "convert_zero_checkpoint_to_fp32_state_dict",
    "get_fp32_state_dict_from_zero_checkpoint",
    "load_state_dict_from_zero_checkpoint",
}


def __getattr__(name: str):
    if name in _LIGHT:
        import importlib

        return getattr(importlib.import_module(f".{_LIGHT[name]}", __name__), name)
    if name in _FP32:  # imports torch: only when asked for
        from . import fp32

        return getattr(fp32, name)
    if name in _SEQUENCE_PARALLEL:  # imports torch: only when asked for
        from . import sequence_parallel

        return getattr(sequence_parallel, name)
    if name in _WRAPPERS:  # imports torch: only when asked for
        from . import wrappers

        return getattr(wrappers, name)
    raise AttributeError(f"module 'accel_deepspeed' has no attribute {name!r}")
