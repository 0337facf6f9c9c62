"""The hooks system: attaching, chaining, removing, and AlignDevicesHook's offloading."""

from __future__ import annotations

import torch
from accel.big_model.hooks import (
    AlignDevicesHook,
    ModelHook,
    SequentialHook,
    add_hook_to_module,
    attach_align_device_hook_on_blocks,
    attach_execution_device_hook,
    remove_hook_from_module,
)
from torch import nn


class AddOne(ModelHook):
    def pre_forward(self, module, *args, **kwargs):
        return (args[0] + 1,), kwargs


class Times(ModelHook):
    def __init__(self, factor):
        self.factor = factor

    def post_forward(self, module, output):
        return output * self.factor


def test_add_replace_append_and_remove():
    layer = nn.Identity()
    x = torch.zeros(2)
    add_hook_to_module(layer, AddOne())
    assert torch.equal(layer(x), torch.ones(2))
    add_hook_to_module(layer, Times(3))  # replaces
    assert torch.equal(layer(x), torch.zeros(2))
    add_hook_to_module(layer, AddOne(), append=True)  # chained after Times
    assert isinstance(layer._hf_hook, SequentialHook)
    assert torch.equal(layer(x), torch.full((2,), 3.0))
    remove_hook_from_module(layer)
    assert "forward" not in layer.__dict__ and not hasattr(layer, "_hf_hook")
    assert torch.equal(layer(x), x)


def test_sequential_hook_order():
    calls = []

    class Record(ModelHook):
        def __init__(self, name):
            self.name = name

        def pre_forward(self, module, *args, **kwargs):
            calls.append(f"pre {self.name}")
            return args, kwargs

        def post_forward(self, module, output):
            calls.append(f"post {self.name}")
            return output

    layer = add_hook_to_module(nn.Identity(), SequentialHook(Record("a"), Record("b")))
    layer(torch.zeros(1))
    assert calls == ["pre a", "pre b", "post b", "post a"]


def test_align_devices_hook_offloads_between_forwards():
    seen = []

    class Probe(nn.Linear):
        def forward(self, x):
            seen.append(self.weight.device.type)
            return super().forward(x)

    torch.manual_seed(0)
    layer = Probe(4, 4)
    x = torch.randn(2, 4)
    expected = layer(x)
    seen.clear()
    weights = {k: v.detach().clone() for k, v in layer.state_dict().items()}
    add_hook_to_module(
        layer, AlignDevicesHook("cpu", offload=True, io_same_device=True, weights_map=weights)
    )
    assert layer.weight.device.type == "meta"
    assert torch.equal(layer(x), expected)
    assert layer.weight.device.type == "meta" and seen == ["cpu"]
    remove_hook_from_module(layer)
    assert layer.weight.device.type == "cpu" and torch.equal(layer(x), expected)


def test_blocks_and_execution_device_hooks():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 2))
    x = torch.randn(5, 3)
    expected = model(x)
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    attach_align_device_hook_on_blocks(
        model,
        execution_device={"0": "cpu", "1": "cpu", "2": "cpu"},
        offload={"0": False, "1": False, "2": True},
        weights_map=weights,
    )
    assert model[0].weight.device.type == "cpu" and model[2].weight.device.type == "meta"
    assert torch.equal(model(x), expected)
    remove_hook_from_module(model, recurse=True)
    attach_execution_device_hook(model, {"": "cpu"})
    assert hasattr(model[0], "_hf_hook") and not hasattr(model[1], "_hf_hook")
    assert torch.equal(model(x), expected)
