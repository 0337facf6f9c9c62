"""The device-map planner: budgets, sizes, strategies, tied weights, unsplittable classes.

Planning only looks at sizes, so maps for GPU indices are checked here without a GPU.
"""

from __future__ import annotations

import pytest
import torch
from accel import infer_auto_device_map
from accel.utils import compute_module_sizes, get_balanced_memory, get_max_memory
from accel.utils.device_map import check_device_map, clean_device_map, main_device
from torch import nn

BLOCK = 2 * (32 * 32 + 32) * 4 + 4  # two Linear(32, 32) and a scalar buffer, fp32
EMBED = 40 * 32 * 4


def test_get_max_memory_parses_and_orders():
    budgets = get_max_memory({"disk": "1GB", "cpu": "200KB", "cuda:1": "2GiB", 0: 1000})
    assert list(budgets) == [0, 1, "cpu", "disk"]
    assert budgets == {0: 1000, 1: 2 * 2**30, "cpu": 200_000, "disk": 10**9}
    detected = get_max_memory()
    assert detected["cpu"] > 0
    with pytest.raises(ValueError, match="max_memory"):
        get_max_memory({"cpu": "lots"})
    with pytest.raises(ValueError, match="unknown device"):
        get_max_memory({"gpu0": "1GB"})


def test_compute_module_sizes_counts_tied_once_and_dtype(empty_model):
    model = empty_model()
    sizes = compute_module_sizes(model)
    assert sizes["embed"] == EMBED and sizes["head"] == 0  # the tied weight counted once
    assert sizes["blocks.0"] == BLOCK
    assert sizes[""] == EMBED + 4 * BLOCK + 2 * 32 * 4
    half = compute_module_sizes(model, dtype=torch.float16)
    assert half["blocks.0.fc1.weight"] == 32 * 32 * 2
    special = compute_module_sizes(
        model, dtype="float16", special_dtypes={"norm.weight": "float32"}
    )
    assert special["norm.weight"] == 32 * 4


def test_everything_fits_gives_one_entry(empty_model):
    assert infer_auto_device_map(empty_model(), max_memory={"cpu": "1MB"}) == {"": "cpu"}
    assert infer_auto_device_map(empty_model(), max_memory={0: "1MB", "cpu": "1MB"}) == {"": 0}


def test_no_split_module_classes_respected(empty_model):
    model = empty_model()
    budget = {0: EMBED + BLOCK + BLOCK // 2, 1: EMBED + 2 * BLOCK, "cpu": 10**6}
    free = infer_auto_device_map(model, max_memory=budget)
    assert any(name.count(".") >= 2 for name in free), free  # a block was cut
    kept = infer_auto_device_map(model, max_memory=budget, no_split_module_classes=["Block"])
    assert all(name.count(".") <= 1 for name in kept), kept
    # Part goes to the CPU, so device 0 keeps room for one block to run offloaded ones.
    assert kept["embed"] == 0 and kept["blocks.0"] == 1 and kept["blocks.2"] == "cpu", kept
    check_device_map(model, kept)


def test_tied_parameters_planned_on_one_device(empty_model):
    model = empty_model()
    budget = {0: EMBED + 2 * BLOCK + 100, 1: 3 * BLOCK, "cpu": 10**6}
    device_map = infer_auto_device_map(model, max_memory=budget, no_split_module_classes=["Block"])
    assert device_map["embed"] == device_map["head"] == 0, device_map
    assert device_map["blocks.3"] == 1


def test_offload_reserves_the_largest_layer_on_the_main_device(empty_model):
    model = empty_model()
    device_map = infer_auto_device_map(
        model, max_memory={"cpu": EMBED + 2 * BLOCK + 100}, no_split_module_classes=["Block"]
    )
    # Without the reserve two blocks would fit; with it, one block plus the embedding.
    assert device_map["blocks.0"] == "cpu" and device_map["blocks.1"] == "disk", device_map
    gpu = infer_auto_device_map(
        model,
        max_memory={0: EMBED + 2 * BLOCK + 100, "cpu": 2 * BLOCK + 10},
        no_split_module_classes=["Block"],
    )
    assert gpu["blocks.0"] == 0 and gpu["blocks.1"] == "cpu" and gpu["blocks.3"] == "disk", gpu
    assert main_device(gpu) == 0


def test_balanced_strategies_over_gpu_indices(empty_model):
    model = empty_model(depth=8)
    budget = {0: "1MB", 1: "1MB", 2: "1MB", "cpu": "1MB"}
    no_split = ["Block"]
    sequential = infer_auto_device_map(model, max_memory=budget, no_split_module_classes=no_split)
    assert sequential == {"": 0}
    balanced = infer_auto_device_map(
        model,
        max_memory=get_balanced_memory(model, budget, no_split_module_classes=no_split),
        no_split_module_classes=no_split,
    )
    per_device = {d: [n for n, v in balanced.items() if v == d] for d in (0, 1, 2)}
    assert all(per_device.values()), balanced
    assert balanced["blocks.7"] == 2
    low0 = get_balanced_memory(model, budget, no_split_module_classes=no_split, low_zero=True)
    assert low0[0] == 0  # everything fits on 1 and 2
    low_map = infer_auto_device_map(model, max_memory=low0, no_split_module_classes=no_split)
    assert 0 not in low_map.values() and {1, 2} <= set(low_map.values()), low_map


def test_clean_and_check_device_map(empty_model):
    model = empty_model(depth=2)
    raw = {"embed": "cpu", "blocks.0.fc1": "cpu", "blocks.0.fc2": "cpu", "blocks.0.scale": "cpu"}
    raw.update({"blocks.1": "disk", "norm": "disk", "head": "cpu"})
    assert clean_device_map(raw, model) == {
        "embed": "cpu",
        "blocks.0": "cpu",
        "blocks.1": "disk",
        "norm": "disk",
        "head": "cpu",
    }
    # Accelerate warns (in these words) and goes on
    with pytest.warns(UserWarning, match="device_map keys do not match any submodules.*'decoder'"):
        check_device_map(model, {"": "cpu", "decoder": "cpu"})


def test_unsplittable_model_moves_to_next_device():
    model = nn.Linear(100, 100)
    assert infer_auto_device_map(model, max_memory={0: 100, "cpu": 10**6}) == {"": "cpu"}


def test_a_device_too_small_for_any_part_is_logged_as_insufficient_memory(caplog):
    from collections import OrderedDict

    inner = torch.nn.Sequential(
        OrderedDict(
            linear1=torch.nn.Linear(10, 4),
            linear2=torch.nn.Linear(4, 4),
            linear3=torch.nn.Linear(4, 8),
        )
    )
    model = torch.nn.Sequential(OrderedDict(module=inner))
    with caplog.at_level("INFO"):
        device_map = infer_auto_device_map(model, max_memory={0: 256}, fallback_allocation=False)
    assert all(device != 0 for device in device_map.values())
    assert "insufficient memory" in caplog.text
