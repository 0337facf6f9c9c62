"""Accelerate's FSDP names transformers, PEFT and TRL import, and what they rely on."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

WORKER = Path(__file__).parent / "workers" / "fsdp_utils_single.py"

FUNCTIONS = {
    "save_fsdp_model": ["fsdp_plugin", "accelerator", "model", "output_dir", "model_index", "adapter_only"],
    "load_fsdp_model": ["fsdp_plugin", "accelerator", "model", "input_dir", "model_index", "adapter_only"],
    "save_fsdp_optimizer": [
        "fsdp_plugin", "accelerator", "optimizer", "model", "output_dir", "optimizer_index"
    ],
    "load_fsdp_optimizer": [
        "fsdp_plugin", "accelerator", "optimizer", "model", "input_dir", "optimizer_index", "adapter_only"
    ],
}  # fmt: skip

CONSTANTS = {  # Accelerate 1.15's values
    "FSDP_SHARDING_STRATEGY": [
        "FULL_SHARD",
        "SHARD_GRAD_OP",
        "NO_SHARD",
        "HYBRID_SHARD",
        "HYBRID_SHARD_ZERO2",
    ],
    "FSDP_AUTO_WRAP_POLICY": ["TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"],
    "FSDP_BACKWARD_PREFETCH": ["BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"],
    "FSDP_STATE_DICT_TYPE": ["FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT"],
    "FSDP2_STATE_DICT_TYPE": ["SHARDED_STATE_DICT", "FULL_STATE_DICT"],
    "FSDP_PYTORCH_VERSION": "2.1.0.a0+32f93b1",
    "FSDP2_PYTORCH_VERSION": "2.6.0",
    "FSDP_MODEL_NAME": "pytorch_model_fsdp",
}


@pytest.mark.parametrize("module", ["accel.utils", "accel.utils.fsdp_utils"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_checkpoint_functions_have_accelerates_signature(module, name):
    function = getattr(importlib.import_module(module), name)
    assert list(inspect.signature(function).parameters)[: len(FUNCTIONS[name])] == FUNCTIONS[name]
    assert function.__doc__


@pytest.mark.parametrize("module", ["accel.utils", "accel.utils.constants"])
def test_constants(module):
    namespace = importlib.import_module(module)
    for name, value in CONSTANTS.items():
        assert getattr(namespace, name) == value, name


def test_transformers_asks_for_adapter_only():
    pytest.importorskip("accelerate")
    fsdp = pytest.importorskip("transformers.distributed.fsdp")
    assert fsdp.get_fsdp_ckpt_kwargs() == {"adapter_only": True}


def test_get_module_class_from_name_and_get_parameters_from_modules():
    from accel.utils.dataclasses import get_module_class_from_name
    from accel.utils.fsdp_utils import get_parameters_from_modules

    model = torch.nn.Sequential(
        torch.nn.Linear(2, 2), torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(2, 3))
    )
    assert get_module_class_from_name(model, "ReLU") is torch.nn.ReLU
    assert get_module_class_from_name(model, "Sequential") is torch.nn.Sequential
    assert get_module_class_from_name(model, "Conv2d") is None
    assert get_parameters_from_modules(None, model, "cpu") == set()
    by_name = get_parameters_from_modules(r"1\.1", model, "cpu")
    assert by_name == set(model[1][1].parameters())
    assert get_parameters_from_modules([model[0]], model, "cpu") == set(model[0].parameters())


def test_set_mixed_precision():
    from accel_fsdp import FullyShardedDataParallelPlugin
    from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy

    plugin = FullyShardedDataParallelPlugin(fsdp_version=2)
    plugin.set_mixed_precision("bf16")
    policy = plugin.mixed_precision_policy
    assert isinstance(policy, MixedPrecisionPolicy)
    assert (policy.param_dtype, policy.reduce_dtype, policy.output_dtype) == (torch.bfloat16,) * 3
    plugin.set_mixed_precision(torch.float16)  # a policy is set: kept without override
    assert plugin.mixed_precision_policy is policy
    plugin.set_mixed_precision(torch.float16, override=True)  # what transformers does for QLoRA
    assert plugin.mixed_precision_policy.param_dtype == torch.float16

    plugin = FullyShardedDataParallelPlugin(fsdp_version=1)
    plugin.set_mixed_precision("fp16", buffer_autocast=True)
    policy = plugin.mixed_precision_policy
    assert isinstance(policy, MixedPrecision)
    assert (policy.param_dtype, policy.buffer_dtype) == (torch.float16, torch.float32)

    plugin = FullyShardedDataParallelPlugin(
        fsdp_version=2,
        mixed_precision_policy={"param_dtype": "bf16", "reduce_dtype": torch.float32},
    )
    plugin.set_mixed_precision("fp16")
    assert plugin.mixed_precision_policy.param_dtype == torch.bfloat16
    assert plugin.mixed_precision_policy.reduce_dtype == torch.float32
    with pytest.raises(ValueError, match="fp16"):
        plugin.set_mixed_precision("fp4", override=True)
    with pytest.raises(ValueError, match="buffer_dtype"):
        FullyShardedDataParallelPlugin(
            fsdp_version=2, mixed_precision_policy={"buffer_dtype": torch.float32}
        ).set_mixed_precision("bf16")
    assert isinstance(
        FullyShardedDataParallelPlugin(mixed_precision_policy="bf16").mixed_precision_policy,
        MixedPrecisionPolicy,
    )


def test_set_state_dict_type():
    from accel.errors import ConfigError
    from accel_fsdp import FullyShardedDataParallelPlugin
    from torch.distributed.fsdp import StateDictType

    plugin = FullyShardedDataParallelPlugin(state_dict_type="sharded_state_dict")
    assert plugin.state_dict_type == "SHARDED_STATE_DICT"
    plugin.set_state_dict_type("FULL_STATE_DICT")  # transformers' docs: before the final save
    assert plugin.state_dict_type == "FULL_STATE_DICT"
    plugin.set_state_dict_type(StateDictType.SHARDED_STATE_DICT)
    assert plugin.state_dict_type == "SHARDED_STATE_DICT"
    with pytest.raises(ConfigError, match="LOCAL_STATE_DICT"):
        plugin.set_state_dict_type(2)


def test_fsdp1_takes_the_sharding_strategy_from_reshard_after_forward():
    from accel_fsdp import FullyShardedDataParallelPlugin

    plugin = FullyShardedDataParallelPlugin(fsdp_version=1, reshard_after_forward="shard_grad_op")
    assert plugin.sharding_strategy == "SHARD_GRAD_OP"


def test_cpu_ram_efficient_loading_reaches_transformers(monkeypatch):
    from accel.utils import disable_fsdp_ram_efficient_loading, enable_fsdp_ram_efficient_loading
    from accel_fsdp import FullyShardedDataParallelPlugin

    monkeypatch.delenv("ACCELERATE_USE_FSDP", raising=False)
    monkeypatch.delenv("FSDP_CPU_RAM_EFFICIENT_LOADING", raising=False)
    FullyShardedDataParallelPlugin()
    assert "FSDP_CPU_RAM_EFFICIENT_LOADING" not in os.environ
    FullyShardedDataParallelPlugin(cpu_ram_efficient_loading=True)
    assert os.environ["FSDP_CPU_RAM_EFFICIENT_LOADING"] == "True"
    disable_fsdp_ram_efficient_loading()
    assert os.environ["FSDP_CPU_RAM_EFFICIENT_LOADING"] == "False"
    enable_fsdp_ram_efficient_loading()
    assert os.environ["FSDP_CPU_RAM_EFFICIENT_LOADING"] == "True"
    assert os.environ["ACCELERATE_USE_FSDP"] == "True"


@pytest.mark.parametrize(
    ("fsdp", "fsdp_config", "expected"),
    [
        (
            "full_shard auto_wrap",
            {"transformer_layer_cls_to_wrap": ["Block"], "state_dict_type": "SHARDED_STATE_DICT"},
            {
                "fsdp_version": 2,
                "sharding_strategy": "FULL_SHARD",
                "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
                "transformer_cls_names_to_wrap": ["Block"],
                "state_dict_type": "SHARDED_STATE_DICT",
            },
        ),
        (
            "shard_grad_op auto_wrap offload",
            {"version": 1, "auto_wrap_policy": "SIZE_BASED_WRAP", "min_num_params": 10},
            {
                "fsdp_version": 1,
                "sharding_strategy": "SHARD_GRAD_OP",
                "auto_wrap_policy": "SIZE_BASED_WRAP",
                "min_num_params": 10,
                "offload_params": True,
                "backward_prefetch": "NO_PREFETCH",
                "sync_module_states": True,
            },
        ),
    ],
)
def test_training_arguments_make_a_plugin(monkeypatch, fsdp, fsdp_config, expected):
    """What transformers' Trainer passes: ``FullyShardedDataParallelPlugin(**args.fsdp_plugin_args)``."""
    pytest.importorskip("accelerate")
    transformers = pytest.importorskip("transformers")
    from accel_fsdp import FullyShardedDataParallelPlugin

    monkeypatch.setenv("FSDP_CPU_RAM_EFFICIENT_LOADING", "false")  # TrainingArguments sets it
    args = transformers.TrainingArguments(
        output_dir="unused", fsdp=fsdp, fsdp_config=fsdp_config, use_cpu=True, report_to=[]
    )
    plugin = FullyShardedDataParallelPlugin(**args.fsdp_plugin_args)
    for name, value in expected.items():
        assert getattr(plugin, name) == value, (name, getattr(plugin, name))


@pytest.mark.timeout(300)
def test_one_process_save_load_and_recursive_unwrap(tmp_path):
    pytest.importorskip("peft")
    env = {**os.environ, "ACCEL_USE_CPU": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(WORKER), "unwrap,twice,roundtrip,adapter", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    assert "ok unwrap" in done.stdout and "ok roundtrip" in done.stdout
    assert "ok twice" in done.stdout  # issue 29: preparing twice does not shard twice
    assert "ok adapter" in done.stdout


def test_fsdp_launch_exports_the_variables_transformers_and_peft_read():
    from accel.launchers.planning import worker_environment

    env = worker_environment(
        {
            "distributed_type": "FSDP",
            "num_processes": 2,
            "fsdp_config": {
                "fsdp_cpu_ram_efficient_loading": True,
                "fsdp_transformer_layer_cls_to_wrap": ["GPT2Block", "LlamaDecoderLayer"],
            },
        }
    )
    assert env["ACCELERATE_USE_FSDP"] == "true"
    assert env["FSDP_CPU_RAM_EFFICIENT_LOADING"] == "true"
    assert env["FSDP_TRANSFORMER_CLS_TO_WRAP"] == "GPT2Block,LlamaDecoderLayer"
