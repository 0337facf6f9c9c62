"""Accelerate's ``fsdp_config`` keys and ``FullyShardedDataParallelPlugin.set_auto_wrap_policy`` (issue 19)."""

from __future__ import annotations

import functools

import pytest
import torch
from accel_fsdp.config import FSDP_SECTION, FullyShardedDataParallelPlugin
from accel_fsdp.wrap import ignored_modules, units_to_shard
from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy, transformer_auto_wrap_policy

ACCELERATE_SECTION = {  # what `accelerate config` writes for FSDP2
    "fsdp_activation_checkpointing": False,
    "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
    "fsdp_cpu_ram_efficient_loading": True,
    "fsdp_ignored_modules": None,
    "fsdp_offload_params": False,
    "fsdp_reshard_after_forward": True,
    "fsdp_state_dict_type": "SHARDED_STATE_DICT",
    "fsdp_version": 2,
}


class Block(torch.nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.fc = torch.nn.Linear(width, width)


class Net(torch.nn.Module):
    _no_split_modules = ["Block"]

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(), Block(), Block(32)])
        self.head = torch.nn.Linear(8, 1)


def test_accelerate_section_with_null_ignored_modules_is_valid():
    assert FSDP_SECTION.validate(ACCELERATE_SECTION) == []
    values = FSDP_SECTION.read(ACCELERATE_SECTION, defaults=False)
    assert "fsdp_ignored_modules" not in values  # null means "not set"
    assert FSDP_SECTION.read({"fsdp_ignored_modules": "blocks\\.0"})["fsdp_ignored_modules"] == (
        "blocks\\.0"
    )


def test_ignored_modules_regex_matches_names_in_full():
    model = Net()
    plugin = FullyShardedDataParallelPlugin(ignored_modules="blocks\\.[01]")
    assert ignored_modules(model, plugin) == [model.blocks[0], model.blocks[1]]
    plugin = FullyShardedDataParallelPlugin(ignored_modules="blocks")  # full match only
    assert ignored_modules(model, plugin) == [model.blocks]
    assert ignored_modules(model, FullyShardedDataParallelPlugin()) is None
    assert ignored_modules(model, FullyShardedDataParallelPlugin(ignored_modules=[model.head])) == [
        model.head
    ]


def test_set_auto_wrap_policy_transformer_defaults_to_no_split_modules():
    model = Net()
    plugin = FullyShardedDataParallelPlugin(auto_wrap_policy="TRANSFORMER_BASED_WRAP")
    plugin.set_auto_wrap_policy(model)
    assert plugin.transformer_cls_names_to_wrap == ["Block"]
    policy = plugin.auto_wrap_policy
    assert isinstance(policy, functools.partial) and policy.func is transformer_auto_wrap_policy
    assert policy.keywords == {"transformer_layer_cls": {Block}}
    assert units_to_shard(model, plugin) == list(model.blocks)


def test_set_auto_wrap_policy_transformer_unknown_class_raises():
    plugin = FullyShardedDataParallelPlugin(
        auto_wrap_policy="TRANSFORMER_BASED_WRAP", transformer_cls_names_to_wrap=["T5Block"]
    )
    with pytest.raises(ValueError, match="T5Block"):
        plugin.set_auto_wrap_policy(Net())


def test_set_auto_wrap_policy_size_based():
    model = Net()
    plugin = FullyShardedDataParallelPlugin(auto_wrap_policy="SIZE_BASED_WRAP", min_num_params=500)
    plugin.set_auto_wrap_policy(model)
    policy = plugin.auto_wrap_policy
    assert policy.func is size_based_auto_wrap_policy and policy.keywords == {"min_num_params": 500}
    # the first module (children first) holding >= 500 parameters: the 32x32 Linear, as FSDP1 wraps
    assert units_to_shard(model, plugin) == [model.blocks[2].fc]
    zero = FullyShardedDataParallelPlugin(auto_wrap_policy="SIZE_BASED_WRAP", min_num_params=0)
    zero.set_auto_wrap_policy(model)
    assert zero.auto_wrap_policy is None  # as Accelerate: a zero minimum wraps nothing


def test_set_auto_wrap_policy_keeps_other_values():
    own = functools.partial(lambda module, recurse, nonwrapped_numel: isinstance(module, Block))
    for value in (None, "NO_WRAP", own):
        plugin = FullyShardedDataParallelPlugin(auto_wrap_policy=value)
        plugin.set_auto_wrap_policy(Net())
        assert plugin.auto_wrap_policy is value
    model = Net()
    plugin = FullyShardedDataParallelPlugin(auto_wrap_policy=own)
    assert units_to_shard(model, plugin) == list(model.blocks)  # torch's FSDP1 signature
