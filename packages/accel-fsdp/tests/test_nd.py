"""accel_fsdp.nd and the parallelism_config section, on one process (no process group)."""

from __future__ import annotations

import pytest
import torch
from accel.errors import ConfigError
from accel_fsdp.nd import (
    load_balanced_indices,
    model_tp_plan,
    resolve_tp_plan,
    shard_sequence,
    tp_style,
)
from accel_fsdp.nd_config import PARALLELISM_SECTION, launch_environment
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(4, 8)
        self.down = torch.nn.Linear(8, 4)


class Net(torch.nn.Module):
    tp_plan = {"blocks.*.up": "colwise", "blocks.*.down": "rowwise"}

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(3))
        self.head = torch.nn.Linear(4, 1)


def test_plan_patterns_match_whole_name_parts():
    model = Net()
    plan = resolve_tp_plan(model, model_tp_plan(model))
    assert sorted(plan) == [f"blocks.{i}.{n}" for i in range(3) for n in ("down", "up")]
    assert isinstance(plan["blocks.0.up"], ColwiseParallel)
    assert isinstance(plan["blocks.2.down"], RowwiseParallel)
    with pytest.raises(ConfigError, match="'blocks.up' matches no module of Net"):
        resolve_tp_plan(model, {"blocks.up": "colwise"})
    with pytest.raises(ConfigError, match="diagonal"):
        tp_style("diagonal")
    style = RowwiseParallel()
    assert tp_style(style) is style
    assert model_tp_plan(torch.nn.Linear(2, 2)) is None


def test_sequence_splits():
    x = torch.arange(24).reshape(2, 12)
    assert shard_sequence(x, 1, 3).tolist() == [[4, 5, 6, 7], [16, 17, 18, 19]]
    with pytest.raises(ValueError, match="divisible by sp_size=5"):
        shard_sequence(x, 0, 5)
    # head-tail: rank r keeps chunks r and 2*cp-1-r, so causal attention work is balanced
    assert load_balanced_indices(8, 0, 2).tolist() == [0, 1, 6, 7]
    assert load_balanced_indices(8, 1, 2).tolist() == [2, 3, 4, 5]
    with pytest.raises(ValueError, match="2 x cp_size = 4"):
        load_balanced_indices(6, 0, 2)


def test_section_validation_and_launch_environment():
    assert PARALLELISM_SECTION.validate({"parallelism_config_tp_size": 2}) == []
    errors = PARALLELISM_SECTION.validate({"parallelism_config_tp_sise": 2})
    assert len(errors) == 1 and "did you mean parallelism_config_tp_size" in errors[0]
    errors = PARALLELISM_SECTION.validate(
        {"parallelism_config_cp_size": 2, "parallelism_config_sp_size": 2}
    )
    assert errors and "mutually exclusive" in errors[0]
    env = launch_environment(
        {
            "num_processes": 4,
            "distributed_type": "MULTI_CPU",
            "parallelism_config": {
                "parallelism_config_dp_shard_size": 2,
                "parallelism_config_tp_size": 2,
            },
        }
    )
    assert env["ACCEL_USE_PARALLELISM_CONFIG"] == "true"
    assert env["PARALLELISM_CONFIG_TP_SIZE"] == "2"
    assert env["PARALLELISM_CONFIG_DP_SHARD_SIZE"] == "2"
    assert env["PARALLELISM_CONFIG_CP_BACKEND"] == "torch"
    assert launch_environment({"num_processes": 4}) == {}
    with pytest.raises(ConfigError, match=r"total_size \(2 = .*num_processes \(4\)"):
        launch_environment(
            {"num_processes": 4, "parallelism_config": {"parallelism_config_tp_size": 2}}
        )
