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
    "CustomDtype",
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
_add("accel.unwrap", "extract_model_from_parallel")
_add("accel.compilation", "compile_regions", "has_repeated_blocks")
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
_add("accel.config.files", "write_basic_config")
_add(
    "accel.big_model.device_map",
    "infer_auto_device_map",
    "get_balanced_memory",
    "compute_module_sizes",
    "get_max_memory",
    "check_device_map",
    "clean_device_map",
    "get_max_layer_size",
    "check_tied_parameters_on_same_device",
    "calculate_maximum_sizes",
    "compute_module_total_buffer_size",
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
_add("accel.launchers.arguments", "prepare_multi_gpu_env")
_add(
    "accel.distributed.operations",
    "CannotPadNestedTensorWarning",
    "TensorInformation",
    "convert_outputs_to_fp32",
    "copy_tensor_to_devices",
    "gather_across_data_parallel_groups",
    "get_data_structure",
    "get_pretty_name",
    "honor_type",
    "ignorant_find_batch_size",
    "initialize_tensors",
    "is_namedtuple",
    "is_tensor_information",
    "is_torch_tensor",
    "listify",
    "merge_dicts",
    "pad_input_tensors",
    "recursive_getattr",
)
_add("accel.distributed.process", "is_initialized", "wait_for_everyone")
_add(
    "accel.env_helpers",
    "check_os_kernel",
    "clear_environment",
    "convert_dict_to_env_variables",
    "get_int_from_env",
    "is_port_in_use",
    "parse_choice_from_env",
    "parse_flag_from_env",
    "purge_accelerate_environment",
    "str_to_bool",
)
_add("accel.sizes", "convert_bytes", "convert_file_size_to_int")
_add("accel.memory", "dtype_byte_size")
_add("accel.compilation", "has_compiled_regions", "is_compiled_module")
_add("accel.unwrap", "get_model_tp_size")
_add("accel.mixed_precision", "get_grad_scaler", "get_mixed_precision_context_manager")
_add(
    "accel.checkpoint.weights",
    "clean_state_dict_for_safetensors",
    "load",
    "load_state_dict",
    "save",
)
_add(
    "accel.checkpoint.layout",
    "MODEL_NAME",
    "OPTIMIZER_NAME",
    "RNG_STATE_NAME",
    "SAFE_MODEL_NAME",
    "SCALER_NAME",
    "SCHEDULER_NAME",
)
_add(
    "accel.checkpoint.weights",
    "SAFE_WEIGHTS_INDEX_NAME",
    "SAFE_WEIGHTS_NAME",
    "WEIGHTS_INDEX_NAME",
    "WEIGHTS_NAME",
)
_add(
    "accel.big_model.modeling",
    "check_device_same",
    "check_tied_parameters_in_config",
    "get_non_persistent_buffers",
    "is_peft_model",
    "extract_submodules_state_dict",
    "get_module_children_bottom_up",
    "named_module_tensors",
)
_add(
    "accel.big_model.hooks",
    "align_module_device",
    "find_device",
    "has_offloaded_params",
    "SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING",  # Accelerate's utils.constants name
)
_add("accel.parallelism_config", "ParallelismConfig")
_add("accel.progress", "tqdm")


_add(
    "accel.imports",
    "is_aim_available",
    "is_boto3_available",
    "is_clearml_available",
    "is_comet_ml_available",
    "is_datasets_available",
    "is_deepspeed_available",
    "is_dvclive_available",
    "is_import_timer_available",
    "is_lomo_available",
    "is_matplotlib_available",
    "is_megatron_lm_available",
    "is_mlflow_available",
    "is_msamp_available",
    "is_pandas_available",
    "is_peft_available",
    "is_pippy_available",
    "is_pytest_available",
    "is_rich_available",
    "is_schedulefree_available",
    "is_swanlab_available",
    "is_tensorboard_available",
    "is_timm_available",
    "is_torchao_available",
    "is_torchdata_available",
    "is_torchvision_available",
    "is_trackio_available",
    "is_transformers_available",
    "is_triton_available",
    "is_wandb_available",
    "compare_versions",
    "is_torch_version",
    "is_cuda_available",
    "is_mps_available",
    "is_xpu_available",
    "is_npu_available",
    "is_mlu_available",
    "is_musa_available",
    "is_sdaa_available",
    "is_hpu_available",
    "is_habana_gaudi1",
    "is_neuron_available",
    "is_torch_xla_available",
    "is_bf16_available",
    "is_fp16_available",
    "is_fp8_available",
    "check_cuda_fp8_capability",
    "is_transformer_engine_available",
    "is_transformer_engine_mxfp8_available",
    "is_rocm_available",
    "is_xccl_available",
    "is_weights_only_available",
    "is_torchdata_stateful_dataloader_available",
    "is_bnb_available",
    "is_8bit_bnb_available",
    "is_4bit_bnb_available",
    "is_bitsandbytes_multi_backend_available",
    "is_pynvml_available",
    "is_amdsmi_available",
    "is_sagemaker_available",
)


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
