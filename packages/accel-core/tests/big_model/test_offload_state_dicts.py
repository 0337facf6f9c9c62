"""Accelerate's big-model helpers: state dicts of offloaded models, sizes with ties, upcast layers."""

from __future__ import annotations

import importlib
import logging

import pytest
import torch
from accel import Accelerator
from accel.big_model.device_map import compute_module_sizes, get_module_size_with_ties
from accel.big_model.dispatch import cpu_offload
from accel.big_model.hooks import (
    SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING,
    LayerwiseCastingHook,
    attach_layerwise_casting_hooks,
    get_state_dict_from_offload,
    get_state_dict_offloaded_model,
    has_offloaded_params,
)
from accel.testing.models import offload_tied_net, tied_net
from torch import nn

# -- SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING ----------------------------------------------------


@pytest.mark.parametrize("module", ["accel.utils.constants", "accelerate.utils.constants"])
def test_upcasting_layers_are_one_object_under_accelerates_path(module):
    if module.startswith("accelerate"):
        pytest.importorskip("accelerate")
    assert importlib.import_module(module).SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING is (
        SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING
    )
    assert set(SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING) == {
        nn.Linear,
        nn.Conv1d,
        nn.Conv2d,
        nn.Conv3d,
        nn.ConvTranspose1d,
        nn.ConvTranspose2d,
        nn.ConvTranspose3d,
    }


def test_layerwise_casting_hooks_go_on_the_upcasting_layers_only():
    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.Sequential(nn.Conv1d(1, 1, 1)))
    attach_layerwise_casting_hooks(model, torch.float16, torch.float32)
    hooked = {
        name
        for name, module in model.named_modules()
        if isinstance(getattr(module, "_hf_hook", None), LayerwiseCastingHook)
    }
    assert hooked == {"0", "2.0"}
    for name in hooked:
        assert isinstance(model.get_submodule(name), SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING)
    assert model[1].weight.dtype == torch.float32 and model[0].weight.dtype == torch.float16


# -- get_module_size_with_ties -------------------------------------------------------------------


def test_module_size_with_ties_finds_each_holder_by_dotted_prefix():
    layers = 12  # names "1" and "10" share a prefix: "10.weight" must not be given to "1"
    model = nn.ModuleList(nn.Linear(3, 3) for _ in range(layers))
    for i in range(1, layers):
        model[i].weight = model[i - 1].weight
    sizes = {
        "": 0,
        **{str(i): 48 for i in range(layers)},
        **{f"{i}.weight": 36 for i in range(layers)},
        **{f"{i}.bias": 12 for i in range(layers)},
    }
    tied = sorted(f"{i}.weight" for i in range(1, layers))  # "1", "10", "11", "2", ...
    to_treat = list(model.named_children())[1:]
    size, names, modules = get_module_size_with_ties(tied, 48, sizes, to_treat)
    assert size == 48 + (layers - 1) * (48 - 36)  # per holder: its size minus the tied weight
    assert names == [t.split(".")[0] for t in tied]
    assert all(module is model[int(name)] for name, module in zip(names, modules))


def test_module_size_with_ties_with_real_sizes_and_nothing_tied():
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    sizes = compute_module_sizes(model)
    treat = list(model.named_children())
    assert get_module_size_with_ties([], sizes["0"], sizes, treat) == (sizes["0"], [], [])
    size, names, modules = get_module_size_with_ties(["1.bias"], sizes["0"], sizes, treat)
    assert size == sizes["0"] + sizes["1"] - sizes["1.bias"]
    assert names == ["1"] and modules == [model[1]]
    with pytest.raises(ValueError, match="'2.weight'"):
        get_module_size_with_ties(["2.weight"], sizes["0"], sizes, treat)


# -- get_state_dict_offloaded_model ----------------------------------------------------------


@pytest.mark.parametrize("kind", ["cpu_offload", "disk_offload", "dispatch_disk"])
def test_offloaded_model_state_dict_has_every_real_weight(kind, tmp_path):
    net, expected = tied_net(width=6)
    x = torch.randn(2, 6)
    reference = net(x)
    net = offload_tied_net(kind, net, tmp_path)
    assert any(p.device.type == "meta" for p in net.parameters())  # really offloaded
    state_dict = get_state_dict_offloaded_model(net)
    assert state_dict.keys() == expected.keys()  # buffers and both tied names
    for key, value in state_dict.items():
        assert value.device.type == "cpu" and torch.equal(value, expected[key]), key
    # the weights went back to their offload place, and the model still runs
    assert any(p.device.type == "meta" for p in net.parameters())
    torch.testing.assert_close(net(x), reference)


def test_offloaded_model_state_dict_leaves_out_meta_tensors_with_a_warning(caplog):
    net, expected = tied_net(width=6)
    cpu_offload(net.middle[0], execution_device="cpu")
    with torch.device("meta"):
        net.middle[1] = nn.Linear(6, 6)  # offloaded nowhere: no values exist
    with caplog.at_level(logging.WARNING, logger="accel.big_model.hooks"):
        state_dict = get_state_dict_offloaded_model(net)
    assert set(state_dict) == set(expected) - {"middle.1.weight", "middle.1.bias"}
    assert net.middle[0].weight.device.type == "meta"  # really offloaded
    assert torch.equal(state_dict["middle.0.weight"], expected["middle.0.weight"])
    assert "middle.1.weight" in caplog.text and "middle.1.bias" in caplog.text


def test_save_model_still_refuses_an_offloaded_model_with_meta_tensors(tmp_path):
    net, _ = tied_net(width=6)
    cpu_offload(net.middle[0], execution_device="cpu")
    with torch.device("meta"):
        net.middle[1] = nn.Linear(6, 6)
    with pytest.raises(RuntimeError, match="meta device"):
        Accelerator(cpu=True).save_model(net, tmp_path / "saved")
    assert not (tmp_path / "saved").exists() or not any((tmp_path / "saved").iterdir())


# -- get_state_dict_from_offload -----------------------------------------------------------------


def test_state_dict_from_a_disk_offloaded_module(tmp_path):
    net, expected = tied_net(width=6)
    net = offload_tied_net("dispatch_disk", net, tmp_path)
    assert has_offloaded_params(net.middle[0]) and net.middle[0].weight.device.type == "meta"
    wanted = {"middle.0.weight": "", "other": 1}
    returned = get_state_dict_from_offload(net.middle[0], "middle.0.weight", wanted, "cpu")
    assert returned is wanted
    assert set(wanted) == {"middle.0.weight", "other"}  # only keys already there are filled
    assert wanted["other"] == 1
    assert wanted["middle.0.weight"].device.type == "cpu"
    assert torch.equal(wanted["middle.0.weight"], expected["middle.0.weight"])
    # keys of the same module given with another tensor's name are filled too
    both = get_state_dict_from_offload(
        net.norm, "norm.weight", {"norm.running_mean": None, "norm.weight": None}
    )
    assert torch.equal(both["norm.running_mean"], expected["norm.running_mean"])
    assert torch.equal(both["norm.weight"], expected["norm.weight"])
    assert net.middle[0].weight.device.type == "meta"  # dropped again afterwards


def test_state_dict_from_a_module_that_is_not_offloaded_does_not_move_it():
    net, expected = tied_net(width=6)
    assert not has_offloaded_params(net.first)
    # the device is only for offloaded weights: the module's own tensors are taken as they are
    got = get_state_dict_from_offload(net.first, "first.bias", {"first.bias": ""}, "meta")
    assert got["first.bias"].device.type == "cpu"
    assert torch.equal(got["first.bias"], expected["first.bias"])
    assert net.first.bias.device.type == "cpu"
