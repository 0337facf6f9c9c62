"""Utilities under Accelerate's ``accelerate.utils`` names, imported on first use."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

_NAMES: dict[str, str] = {}


def _add(module: str, *names: str) -> None:
    for name in names:
        _NAMES[name] = module


_add(
    "accel.kwargs",
    "AutocastKwargs",
    "DataLoaderConfiguration",
    "GradScalerKwargs",
    "GradientAccumulationPlugin",
    "InitProcessGroupKwargs",
    "KwargsHandler",
    "ProjectConfiguration",
    "TorchDynamoPlugin",
)
_add(
    "accel.types",
    "ComputeEnvironment",
    "DistributedType",
    "DynamoBackend",
    "LoggerType",
    "PrecisionType",
    "RNGType",
)
_add(
    "accel.distributed.operations",
    "DistributedOperationException",
    "broadcast",
    "broadcast_object_list",
    "concatenate",
    "convert_to_fp32",
    "find_batch_size",
    "gather",
    "gather_object",
    "gather_uneven",
    "verify_operation",
    "pad_across_processes",
    "recursively_apply",
    "reduce",
    "send_to_device",
    "slice_tensors",
)
_add("accel.rng", "set_seed", "synchronize_rng_state", "synchronize_rng_states")
_add(
    "accel.memory",
    "find_executable_batch_size",
    "release_memory",
    "clear_device_cache",
    "should_reduce_batch_size",
)
_add("accel.models", "extract_model_from_parallel", "compile_regions", "has_repeated_blocks")
_add("accel.checkpoint.weights", "id_tensor_storage", "load_weights", "save_weights")
_add(
    "accel.big_model.modeling",
    "set_module_tensor_to_device",
    "find_tied_parameters",
    "retie_parameters",
)
_add("accel.quantization", "load_and_quantize_model")
_add(
    "accel.parallelism_config",
    "DeepSpeedSequenceParallelConfig",
    "ParallelismConfig",
    "TorchContextParallelConfig",
    "TorchTensorParallelConfig",
)
_add("accel.config.settings", "write_basic_config")
_add(
    "accel.big_model.device_map",
    "infer_auto_device_map",
    "get_balanced_memory",
    "compute_module_sizes",
    "get_max_memory",
    "check_device_map",
    "clean_device_map",
    "get_max_layer_size",
)
_add(
    "accel.big_model.offload",
    "load_offloaded_weights",
    "offload_state_dict",
    "offload_weight",
    "load_offloaded_weight",
    "save_offload_index",
    "PrefixedDataset",
    "OffloadedWeightsLoader",
)
_add("accel.big_model.dispatch", "load_checkpoint_in_model")
_add("accel.launchers.notebook", "patch_environment")


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is not None:
        return getattr(importlib.import_module(module), name)
    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(name)  # a submodule not imported yet: let the import system load it
    try:
        return importlib.import_module("accel._lazy").resolve(name)
    except AttributeError:
        raise AttributeError(f"module 'accel.utils' has no attribute {name!r}") from None


def __dir__() -> list[str]:
    from accel._lazy import exported_names

    return sorted(set(_NAMES) | exported_names())
