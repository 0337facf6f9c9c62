"""What transformers, diffusers and PEFT expect of the big-model API (Accelerate 1.15's behaviour).

Each test pins one contract those libraries rely on: where hooks are stored, which hook
attributes they read, the keywords they pass, the values they compare afterwards.
"""

from __future__ import annotations

import inspect
import json

import accel.hooks
import pytest
import torch
from accel import cpu_offload, disk_offload, infer_auto_device_map, load_checkpoint_and_dispatch
from accel.hooks import (
    AlignDevicesHook,
    CpuOffload,
    ModelHook,
    add_hook_to_module,
    remove_hook_from_module,
    remove_hook_from_submodules,
)
from accel.utils import (
    CustomDtype,
    OffloadedWeightsLoader,
    compute_module_sizes,
    get_balanced_memory,
    get_max_memory,
    set_module_tensor_to_device,
)
from accel.utils.device_map import get_max_layer_size
from torch import nn

# -- where hooks live --------------------------------------------------------------------


def test_hook_and_original_forward_stored_under_accelerates_names():
    layer = nn.Linear(2, 2)
    original = layer.forward
    hook = ModelHook()
    add_hook_to_module(layer, hook)
    # transformers / diffusers / PEFT read exactly these two attributes
    assert layer._hf_hook is hook
    assert layer._old_forward == original
    remove_hook_from_module(layer)
    assert not hasattr(layer, "_hf_hook") and not hasattr(layer, "_old_forward")


def test_hooks_of_dispatched_and_offloaded_models_are_found_by_hf_hook(model_factory, tmp_path):
    offloaded = cpu_offload(model_factory(), execution_device="cpu")
    hooked = [name for name, m in offloaded.named_modules() if hasattr(m, "_hf_hook")]
    assert "" in hooked and "blocks.0.fc1" in hooked
    remove_hook_from_submodules(offloaded)
    assert not any(hasattr(m, "_hf_hook") for m in offloaded.modules())

    on_disk = disk_offload(model_factory(), tmp_path / "off", execution_device="cpu")
    # what transformers' load_offloaded_parameter does to save a disk-offloaded model
    hook = on_disk.blocks[1].fc2._hf_hook
    expected = model_factory().blocks[1].fc2.weight
    assert torch.equal(hook.weights_map["weight"], expected)


def test_hook_rebuilt_from_its_dict_as_peft_does():
    hook = AlignDevicesHook(
        execution_device="cpu",
        offload=True,
        io_same_device=True,
        weights_map={"weight": torch.ones(2, 2)},
        offload_buffers=True,
        place_submodules=True,
        skip_keys=["past"],
        tied_params_map={},
    )
    # PEFT: getattr(accelerate.hooks, name)(**{k: v for k, v in hook.__dict__ if k in __init__})
    cls = getattr(accel.hooks, type(hook).__name__)
    params = inspect.signature(cls.__init__).parameters
    rebuilt = cls(**{k: v for k, v in hook.__dict__.items() if k in params})
    for name in [p for p in params if p != "self"]:
        assert getattr(rebuilt, name) == getattr(hook, name), name
    assert set(params) - {"self"} <= set(hook.__dict__)

    cpu = CpuOffload(execution_device="cpu")
    params = inspect.signature(CpuOffload.__init__).parameters
    rebuilt = CpuOffload(**{k: v for k, v in cpu.__dict__.items() if k in params})
    assert rebuilt.execution_device == torch.device("cpu")


def test_offload_hook_exposes_original_devices_and_the_offload_index(
    tmp_path, sharded_checkpoint, empty_model
):
    model = load_checkpoint_and_dispatch(
        empty_model(), sharded_checkpoint, device_map={"": "disk"}, offload_folder=tmp_path / "o"
    )
    hook = model.blocks[0].fc1._hf_hook
    assert isinstance(hook, AlignDevicesHook) and hook.offload
    # PEFT: a weight whose original device is meta is disk-offloaded; its index entry is
    # found through weights_map.dataset.index
    assert hook.original_devices["weight"] == torch.device("meta")
    index = hook.weights_map.dataset.index
    assert "blocks.0.fc1.weight" in index
    assert "safetensors_file" in index[next(iter(dict(hook.weights_map.dataset)))]


def test_detach_restores_ram_weights_and_leaves_disk_weights_on_meta():
    torch.manual_seed(0)
    layer = nn.Linear(3, 3)
    expected = layer.weight.detach().clone()
    add_hook_to_module(layer, AlignDevicesHook("cpu", offload=True))
    assert layer._hf_hook.original_devices == {
        "weight": torch.device("cpu"),
        "bias": torch.device("cpu"),
    }
    remove_hook_from_module(layer)
    assert torch.equal(layer.weight, expected)

    meta = nn.Linear(3, 3, device="meta")
    weights = {"weight": torch.ones(3, 3), "bias": torch.zeros(3)}
    add_hook_to_module(meta, AlignDevicesHook("cpu", offload=True, weights_map=weights))
    assert torch.equal(meta(torch.ones(1, 3)), torch.full((1, 3), 3.0))
    remove_hook_from_module(meta)
    assert meta.weight.device.type == "meta"  # its only copy is in the weights map


def test_peft_style_onload_merge_offload_cycle():
    torch.manual_seed(0)
    layer = nn.Linear(2, 2, bias=False)
    add_hook_to_module(layer, AlignDevicesHook("cpu", offload=True))
    # PEFT's onload_layer: load, change the weight, rebuild weights_map, drop again
    layer._hf_hook.pre_forward(layer)
    with torch.no_grad():
        layer.weight.add_(1.0)
    changed = layer.weight.detach().clone()
    layer._hf_hook.weights_map = {"weight": layer.weight.to("cpu")}
    layer._hf_hook.post_forward(layer, torch.tensor([]))
    assert layer.weight.device.type == "meta"
    x = torch.eye(2)
    assert torch.equal(layer(x), x @ changed.T)


def test_non_persistent_buffers_stay_on_the_execution_device_with_offload_buffers():
    module = nn.Module()
    module.weight = nn.Parameter(torch.ones(2))
    module.register_buffer("kept", torch.full((2,), 2.0))
    module.register_buffer("transient", torch.full((2,), 3.0), persistent=False)
    weights = {"weight": torch.ones(2), "kept": torch.full((2,), 2.0)}  # a state dict
    hook = AlignDevicesHook("cpu", offload=True, weights_map=weights, offload_buffers=True)
    add_hook_to_module(module, hook)
    assert module.kept.device.type == "meta" and module.transient.device.type == "cpu"
    hook.pre_forward(module)  # no KeyError: the transient buffer is not looked up
    assert torch.equal(module.kept, weights["kept"])


# -- set_module_tensor_to_device -----------------------------------------------------------


def test_set_module_tensor_to_device_refuses_a_wrong_shape_in_accelerates_words():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4))
    with pytest.raises(ValueError) as info:
        set_module_tensor_to_device(model, "0.weight", "cpu", value=torch.zeros(2, 2))
    assert str(info.value) == (
        'Trying to set a tensor of shape torch.Size([2, 2]) in "weight" '
        "(which has shape torch.Size([4, 3])), this looks incorrect."
    )
    assert model[0].weight.shape == (4, 3)


def test_set_module_tensor_to_device_accepts_accelerates_keywords():
    layer = nn.Linear(2, 2)
    value = torch.ones(2, 2)
    set_module_tensor_to_device(
        layer, "weight", "cpu", value=value, non_blocking=True, clear_cache=False
    )
    assert torch.equal(layer.weight, value)
    statistics = torch.tensor([1.0, 2.0], dtype=torch.float16)
    set_module_tensor_to_device(layer, "weight", "cpu", value=value, fp16_statistics=statistics)
    assert torch.equal(layer.weight.SCB, statistics)
    names = list(inspect.signature(set_module_tensor_to_device).parameters)
    assert names == [
        "module",
        "tensor_name",
        "device",
        "value",
        "dtype",
        "fp16_statistics",
        "tied_params_map",
        "non_blocking",
        "clear_cache",
    ]


def test_set_module_tensor_to_device_reuses_tied_copies():
    shared = torch.ones(2, 2)
    first, second = nn.Linear(2, 2, device="meta"), nn.Linear(2, 2, device="meta")
    tied: dict = {shared.data_ptr(): {}}
    set_module_tensor_to_device(first, "weight", "cpu", value=shared, tied_params_map=tied)
    assert tied[shared.data_ptr()]["cpu"] is first.weight
    set_module_tensor_to_device(second, "weight", "cpu", value=shared, tied_params_map=tied)
    assert second.weight is first.weight  # no second copy on the device


def test_set_module_tensor_to_device_keeps_the_loaded_flag_of_transformers():
    layer = nn.Linear(2, 2)
    layer.weight._is_hf_initialized = True
    set_module_tensor_to_device(layer, "weight", "cpu", value=torch.zeros(2, 2))
    assert layer.weight._is_hf_initialized and layer.weight.requires_grad


def test_align_devices_hook_shares_tied_weights_through_tied_params_map():
    shared = torch.randn(3, 3)
    model = nn.Sequential(nn.Linear(3, 3, bias=False), nn.Linear(3, 3, bias=False))
    model[1].weight = model[0].weight
    tied = {model[0].weight.data_ptr(): {}}
    weights = {"0.weight": shared, "1.weight": shared}
    seen = []

    class Probe(ModelHook):
        def pre_forward(self, module, *args, **kwargs):
            seen.append(module.weight)
            return args, kwargs

    # one hook loading both tied names at once (a preloaded block)
    hook = AlignDevicesHook(
        "cpu", offload=True, weights_map=weights, place_submodules=True, tied_params_map=tied
    )
    add_hook_to_module(model, hook)
    assert hook.tied_params_names == {"0.weight", "1.weight"}
    add_hook_to_module(model[0], Probe())
    add_hook_to_module(model[1], Probe())
    x = torch.randn(1, 3)
    assert torch.allclose(model(x), x @ shared.T @ shared.T)
    assert seen[0] is seen[1]  # the second name reused the first one's copy
    assert all(copies == {} for copies in tied.values())  # forgotten, so memory is freed


# -- budgets, sizes and planner arguments ----------------------------------------------------


def test_get_max_memory_converts_the_callers_strings_in_place():
    requested = {"cpu": "400KB", "disk": 10**9}
    budgets = get_max_memory(requested)
    assert requested == {"cpu": 400_000, "disk": 10**9}  # transformers min()s these with ints
    assert budgets == {"cpu": 400_000, "disk": 10**9}
    balanced = {0: "1MB", "cpu": "2MB"}
    get_balanced_memory(nn.Linear(4, 4), max_memory=balanced)
    assert balanced == {0: 10**6, "cpu": 2 * 10**6}


def test_custom_dtype_is_accelerates_enum_and_counts_in_sizes(empty_model):
    assert {m.name: m.value for m in CustomDtype} == {"FP8": "fp8", "INT4": "int4", "INT2": "int2"}
    model = empty_model()
    full = compute_module_sizes(model)["blocks.0.fc1.weight"]
    assert compute_module_sizes(model, dtype=CustomDtype.INT4)["blocks.0.fc1.weight"] == full / 8
    assert compute_module_sizes(model, dtype=CustomDtype.FP8)["blocks.0.fc1.weight"] == full / 4
    special = {"blocks.0.fc1.weight": CustomDtype.INT2}
    assert compute_module_sizes(model, special_dtypes=special)["blocks.0.fc1.weight"] == full / 16
    # diffusers' bitsandbytes quantizer plans a 4-bit model with dtype=CustomDtype.INT4
    plan = infer_auto_device_map(model, max_memory={"cpu": "1MB"}, dtype=CustomDtype.INT4)
    assert plan == {"": "cpu"}


def test_no_split_module_classes_as_a_set_or_a_single_name(empty_model):
    model = empty_model()
    sizes = compute_module_sizes(model)
    entries = list(model.named_children())
    as_list = get_max_layer_size(entries, sizes, ["Block"])
    assert get_max_layer_size(entries, sizes, {"Block"}) == as_list
    assert get_max_layer_size(entries, sizes, "Block") == as_list
    budget = {"cpu": 30_000}
    as_list_map = infer_auto_device_map(model, max_memory=budget, no_split_module_classes=["Block"])
    assert infer_auto_device_map(model, max_memory=budget, no_split_module_classes="Block") == (
        as_list_map
    )


# -- other names of Accelerate's big-model utilities ----------------------------------------


def test_check_device_same_and_non_persistent_buffers():
    from accel.utils import check_device_same, get_non_persistent_buffers

    assert check_device_same(torch.device("cpu"), torch.device("cpu"))
    assert check_device_same(torch.device("cuda"), torch.device("cuda:0"))
    assert not check_device_same(torch.device("cuda:1"), torch.device("cuda:0"))
    outer = nn.Module()
    outer.inner = nn.Module()
    outer.register_buffer("a", torch.zeros(1), persistent=False)
    outer.inner.register_buffer("b", torch.zeros(1), persistent=False)
    outer.inner.register_buffer("c", torch.zeros(1))
    assert get_non_persistent_buffers(outer) == {"a"}
    assert get_non_persistent_buffers(outer, recurse=True) == {"a", "b"}
    assert get_non_persistent_buffers(outer, recurse=True, fqns=True) == {"a", "inner.b"}
    assert outer._non_persistent_buffers_set == {"a"}  # not changed


def test_is_peft_model():
    from accel.utils import is_peft_model

    assert not is_peft_model(nn.Linear(2, 2))
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(
        nn.Sequential(nn.Linear(2, 2)), peft.LoraConfig(r=1, target_modules=["0"])
    )
    assert is_peft_model(model)


def test_safetensors_index_entry_without_dtype(tmp_path):
    from safetensors.torch import save_file

    tensor = torch.arange(4, dtype=torch.float16)
    save_file({"w": tensor}, tmp_path / "a.safetensors")
    # PEFT's _update_offload writes entries with only the file and the weight name
    index = {"x.w": {"safetensors_file": str(tmp_path / "a.safetensors"), "weight_name": "w"}}
    loader = OffloadedWeightsLoader(index=index)
    assert torch.equal(loader["x.w"], tensor)
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "index.json").write_text(json.dumps(index))
    assert torch.equal(OffloadedWeightsLoader(save_folder=tmp_path / "o")["x.w"], tensor)


def test_cpu_offload_runs_where_the_model_is_by_default(model_factory, monkeypatch):
    # Accelerate: the execution device defaults to the model's first parameter's device
    monkeypatch.setattr(
        "accel.big_model.dispatch._default_execution_device", lambda: torch.device("meta")
    )
    model = cpu_offload(model_factory())
    assert model.blocks[0].fc1._hf_hook.execution_device == torch.device("cpu")
