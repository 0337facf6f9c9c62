"""Utilities under Accelerate's ``accelerate.utils`` names, imported on first use.

Also every name a plugin exports (``FullyShardedDataParallelPlugin``, ``DeepSpeedPlugin``, ...,
:func:`accel.lazy.plugin_export`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports, plugin_export, plugin_export_names

if TYPE_CHECKING:  # what editors and type checkers see; at run time each name loads on first use
    from accel.big_model.device_map import calculate_maximum_sizes as calculate_maximum_sizes
    from accel.big_model.device_map import check_device_map as check_device_map
    from accel.big_model.device_map import (
        check_tied_parameters_on_same_device as check_tied_parameters_on_same_device,
    )
    from accel.big_model.device_map import clean_device_map as clean_device_map
    from accel.big_model.device_map import compute_module_sizes as compute_module_sizes
    from accel.big_model.device_map import (
        compute_module_total_buffer_size as compute_module_total_buffer_size,
    )
    from accel.big_model.device_map import get_balanced_memory as get_balanced_memory
    from accel.big_model.device_map import get_max_layer_size as get_max_layer_size
    from accel.big_model.device_map import get_max_memory as get_max_memory
    from accel.big_model.device_map import infer_auto_device_map as infer_auto_device_map
    from accel.big_model.dispatch import load_checkpoint_in_model as load_checkpoint_in_model
    from accel.big_model.hooks import (
        SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING as SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING,
    )
    from accel.big_model.hooks import align_module_device as align_module_device
    from accel.big_model.hooks import find_device as find_device
    from accel.big_model.hooks import has_offloaded_params as has_offloaded_params
    from accel.big_model.modeling import check_device_same as check_device_same
    from accel.big_model.modeling import (
        check_tied_parameters_in_config as check_tied_parameters_in_config,
    )
    from accel.big_model.modeling import (
        extract_submodules_state_dict as extract_submodules_state_dict,
    )
    from accel.big_model.modeling import find_tied_parameters as find_tied_parameters
    from accel.big_model.modeling import (
        get_module_children_bottom_up as get_module_children_bottom_up,
    )
    from accel.big_model.modeling import get_non_persistent_buffers as get_non_persistent_buffers
    from accel.big_model.modeling import is_peft_model as is_peft_model
    from accel.big_model.modeling import named_module_tensors as named_module_tensors
    from accel.big_model.modeling import retie_parameters as retie_parameters
    from accel.big_model.modeling import set_module_tensor_to_device as set_module_tensor_to_device
    from accel.big_model.offload import OffloadedWeightsLoader as OffloadedWeightsLoader
    from accel.big_model.offload import PrefixedDataset as PrefixedDataset
    from accel.big_model.offload import load_offloaded_weight as load_offloaded_weight
    from accel.big_model.offload import load_offloaded_weights as load_offloaded_weights
    from accel.big_model.offload import offload_state_dict as offload_state_dict
    from accel.big_model.offload import offload_weight as offload_weight
    from accel.big_model.offload import save_offload_index as save_offload_index
    from accel.checkpoint.layout import MODEL_NAME as MODEL_NAME
    from accel.checkpoint.layout import OPTIMIZER_NAME as OPTIMIZER_NAME
    from accel.checkpoint.layout import RNG_STATE_NAME as RNG_STATE_NAME
    from accel.checkpoint.layout import SAFE_MODEL_NAME as SAFE_MODEL_NAME
    from accel.checkpoint.layout import SCALER_NAME as SCALER_NAME
    from accel.checkpoint.layout import SCHEDULER_NAME as SCHEDULER_NAME
    from accel.checkpoint.weights import SAFE_WEIGHTS_INDEX_NAME as SAFE_WEIGHTS_INDEX_NAME
    from accel.checkpoint.weights import SAFE_WEIGHTS_NAME as SAFE_WEIGHTS_NAME
    from accel.checkpoint.weights import WEIGHTS_INDEX_NAME as WEIGHTS_INDEX_NAME
    from accel.checkpoint.weights import WEIGHTS_NAME as WEIGHTS_NAME
    from accel.checkpoint.weights import (
        clean_state_dict_for_safetensors as clean_state_dict_for_safetensors,
    )
    from accel.checkpoint.weights import id_tensor_storage as id_tensor_storage
    from accel.checkpoint.weights import load as load
    from accel.checkpoint.weights import load_state_dict as load_state_dict
    from accel.checkpoint.weights import load_weights as load_weights
    from accel.checkpoint.weights import save as save
    from accel.checkpoint.weights import save_weights as save_weights
    from accel.compilation import compile_regions as compile_regions
    from accel.compilation import has_compiled_regions as has_compiled_regions
    from accel.compilation import has_repeated_blocks as has_repeated_blocks
    from accel.compilation import is_compiled_module as is_compiled_module
    from accel.config.files import write_basic_config as write_basic_config
    from accel.distributed.operations import (
        CannotPadNestedTensorWarning as CannotPadNestedTensorWarning,
    )
    from accel.distributed.operations import (
        DistributedOperationException as DistributedOperationException,
    )
    from accel.distributed.operations import TensorInformation as TensorInformation
    from accel.distributed.operations import broadcast as broadcast
    from accel.distributed.operations import broadcast_object_list as broadcast_object_list
    from accel.distributed.operations import concatenate as concatenate
    from accel.distributed.operations import convert_outputs_to_fp32 as convert_outputs_to_fp32
    from accel.distributed.operations import convert_to_fp32 as convert_to_fp32
    from accel.distributed.operations import copy_tensor_to_devices as copy_tensor_to_devices
    from accel.distributed.operations import find_batch_size as find_batch_size
    from accel.distributed.operations import gather as gather
    from accel.distributed.operations import (
        gather_across_data_parallel_groups as gather_across_data_parallel_groups,
    )
    from accel.distributed.operations import gather_object as gather_object
    from accel.distributed.operations import gather_uneven as gather_uneven
    from accel.distributed.operations import get_data_structure as get_data_structure
    from accel.distributed.operations import get_pretty_name as get_pretty_name
    from accel.distributed.operations import honor_type as honor_type
    from accel.distributed.operations import ignorant_find_batch_size as ignorant_find_batch_size
    from accel.distributed.operations import initialize_tensors as initialize_tensors
    from accel.distributed.operations import is_namedtuple as is_namedtuple
    from accel.distributed.operations import is_tensor_information as is_tensor_information
    from accel.distributed.operations import is_torch_tensor as is_torch_tensor
    from accel.distributed.operations import listify as listify
    from accel.distributed.operations import merge_dicts as merge_dicts
    from accel.distributed.operations import pad_across_processes as pad_across_processes
    from accel.distributed.operations import pad_input_tensors as pad_input_tensors
    from accel.distributed.operations import recursive_getattr as recursive_getattr
    from accel.distributed.operations import recursively_apply as recursively_apply
    from accel.distributed.operations import reduce as reduce
    from accel.distributed.operations import send_to_device as send_to_device
    from accel.distributed.operations import slice_tensors as slice_tensors
    from accel.distributed.operations import verify_operation as verify_operation
    from accel.distributed.process import is_initialized as is_initialized
    from accel.distributed.process import wait_for_everyone as wait_for_everyone
    from accel.env_helpers import check_os_kernel as check_os_kernel
    from accel.env_helpers import clear_environment as clear_environment
    from accel.env_helpers import convert_dict_to_env_variables as convert_dict_to_env_variables
    from accel.env_helpers import get_int_from_env as get_int_from_env
    from accel.env_helpers import is_port_in_use as is_port_in_use
    from accel.env_helpers import parse_choice_from_env as parse_choice_from_env
    from accel.env_helpers import parse_flag_from_env as parse_flag_from_env
    from accel.env_helpers import purge_accelerate_environment as purge_accelerate_environment
    from accel.env_helpers import str_to_bool as str_to_bool
    from accel.imports import check_cuda_fp8_capability as check_cuda_fp8_capability
    from accel.imports import compare_versions as compare_versions
    from accel.imports import is_4bit_bnb_available as is_4bit_bnb_available
    from accel.imports import is_8bit_bnb_available as is_8bit_bnb_available
    from accel.imports import is_aim_available as is_aim_available
    from accel.imports import is_amdsmi_available as is_amdsmi_available
    from accel.imports import is_bf16_available as is_bf16_available
    from accel.imports import (
        is_bitsandbytes_multi_backend_available as is_bitsandbytes_multi_backend_available,
    )
    from accel.imports import is_bnb_available as is_bnb_available
    from accel.imports import is_boto3_available as is_boto3_available
    from accel.imports import is_clearml_available as is_clearml_available
    from accel.imports import is_comet_ml_available as is_comet_ml_available
    from accel.imports import is_cuda_available as is_cuda_available
    from accel.imports import is_datasets_available as is_datasets_available
    from accel.imports import is_deepspeed_available as is_deepspeed_available
    from accel.imports import is_dvclive_available as is_dvclive_available
    from accel.imports import is_fp8_available as is_fp8_available
    from accel.imports import is_fp16_available as is_fp16_available
    from accel.imports import is_habana_gaudi1 as is_habana_gaudi1
    from accel.imports import is_hpu_available as is_hpu_available
    from accel.imports import is_import_timer_available as is_import_timer_available
    from accel.imports import is_lomo_available as is_lomo_available
    from accel.imports import is_matplotlib_available as is_matplotlib_available
    from accel.imports import is_megatron_lm_available as is_megatron_lm_available
    from accel.imports import is_mlflow_available as is_mlflow_available
    from accel.imports import is_mlu_available as is_mlu_available
    from accel.imports import is_mps_available as is_mps_available
    from accel.imports import is_msamp_available as is_msamp_available
    from accel.imports import is_musa_available as is_musa_available
    from accel.imports import is_neuron_available as is_neuron_available
    from accel.imports import is_npu_available as is_npu_available
    from accel.imports import is_pandas_available as is_pandas_available
    from accel.imports import is_peft_available as is_peft_available
    from accel.imports import is_pippy_available as is_pippy_available
    from accel.imports import is_pynvml_available as is_pynvml_available
    from accel.imports import is_pytest_available as is_pytest_available
    from accel.imports import is_rich_available as is_rich_available
    from accel.imports import is_rocm_available as is_rocm_available
    from accel.imports import is_sagemaker_available as is_sagemaker_available
    from accel.imports import is_schedulefree_available as is_schedulefree_available
    from accel.imports import is_sdaa_available as is_sdaa_available
    from accel.imports import is_swanlab_available as is_swanlab_available
    from accel.imports import is_tensorboard_available as is_tensorboard_available
    from accel.imports import is_timm_available as is_timm_available
    from accel.imports import is_torch_version as is_torch_version
    from accel.imports import is_torch_xla_available as is_torch_xla_available
    from accel.imports import is_torchao_available as is_torchao_available
    from accel.imports import is_torchdata_available as is_torchdata_available
    from accel.imports import (
        is_torchdata_stateful_dataloader_available as is_torchdata_stateful_dataloader_available,
    )
    from accel.imports import is_torchvision_available as is_torchvision_available
    from accel.imports import is_trackio_available as is_trackio_available
    from accel.imports import is_transformer_engine_available as is_transformer_engine_available
    from accel.imports import (
        is_transformer_engine_mxfp8_available as is_transformer_engine_mxfp8_available,
    )
    from accel.imports import is_transformers_available as is_transformers_available
    from accel.imports import is_triton_available as is_triton_available
    from accel.imports import is_wandb_available as is_wandb_available
    from accel.imports import is_weights_only_available as is_weights_only_available
    from accel.imports import is_xccl_available as is_xccl_available
    from accel.imports import is_xpu_available as is_xpu_available
    from accel.kwargs import AutocastKwargs as AutocastKwargs
    from accel.kwargs import DataLoaderConfiguration as DataLoaderConfiguration
    from accel.kwargs import GradientAccumulationPlugin as GradientAccumulationPlugin
    from accel.kwargs import GradScalerKwargs as GradScalerKwargs
    from accel.kwargs import InitProcessGroupKwargs as InitProcessGroupKwargs
    from accel.kwargs import KwargsHandler as KwargsHandler
    from accel.kwargs import ProjectConfiguration as ProjectConfiguration
    from accel.kwargs import TorchDynamoPlugin as TorchDynamoPlugin
    from accel.launchers.arguments import prepare_multi_gpu_env as prepare_multi_gpu_env
    from accel.launchers.notebook import patch_environment as patch_environment
    from accel.memory import clear_device_cache as clear_device_cache
    from accel.memory import dtype_byte_size as dtype_byte_size
    from accel.memory import find_executable_batch_size as find_executable_batch_size
    from accel.memory import release_memory as release_memory
    from accel.memory import should_reduce_batch_size as should_reduce_batch_size
    from accel.mixed_precision import get_grad_scaler as get_grad_scaler
    from accel.mixed_precision import (
        get_mixed_precision_context_manager as get_mixed_precision_context_manager,
    )
    from accel.parallelism_config import (
        DeepSpeedSequenceParallelConfig as DeepSpeedSequenceParallelConfig,
    )
    from accel.parallelism_config import ParallelismConfig as ParallelismConfig
    from accel.parallelism_config import TorchContextParallelConfig as TorchContextParallelConfig
    from accel.parallelism_config import TorchTensorParallelConfig as TorchTensorParallelConfig
    from accel.progress import tqdm as tqdm
    from accel.quantization import load_and_quantize_model as load_and_quantize_model
    from accel.rng import set_seed as set_seed
    from accel.rng import synchronize_rng_state as synchronize_rng_state
    from accel.rng import synchronize_rng_states as synchronize_rng_states
    from accel.sizes import convert_bytes as convert_bytes
    from accel.sizes import convert_file_size_to_int as convert_file_size_to_int
    from accel.types import ComputeEnvironment as ComputeEnvironment
    from accel.types import CustomDtype as CustomDtype
    from accel.types import DistributedType as DistributedType
    from accel.types import DynamoBackend as DynamoBackend
    from accel.types import LoggerType as LoggerType
    from accel.types import PrecisionType as PrecisionType
    from accel.types import RNGType as RNGType
    from accel.unwrap import extract_model_from_parallel as extract_model_from_parallel
    from accel.unwrap import get_model_tp_size as get_model_tp_size

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


__getattr__, __dir__ = exports(
    __name__, _NAMES, fallback=plugin_export, fallback_names=plugin_export_names
)
