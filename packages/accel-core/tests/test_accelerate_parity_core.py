"""Issue 19: memory, hooks, big-model and unwrap helpers behave as Accelerate's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from accel.hooks import (
    AlignDevicesHook,
    add_hook_to_module,
    align_module_device,
    attach_align_device_hook,
    attach_layerwise_casting_hooks,
    has_offloaded_params,
    remove_hook_from_submodules,
)
from accel.utils import (
    extract_submodules_state_dict,
    find_executable_batch_size,
    load_checkpoint_in_model,
    named_module_tensors,
    should_reduce_batch_size,
)


@pytest.mark.parametrize(
    "message",
    [
        "CUDA out of memory. Tried to allocate 2.00 GiB",
        "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if ...",
        "[enforce fail at alloc_cpu.cpp:114] DefaultCPUAllocator: can't allocate memory: you tried",
        "XPU out of memory.",
    ],
)
def test_plain_runtime_errors_saying_out_of_memory_reduce_the_batch(message):
    assert should_reduce_batch_size(RuntimeError(message))
    sizes = []

    @find_executable_batch_size(starting_batch_size=64)
    def train(batch_size):
        sizes.append(batch_size)
        if batch_size > 50:
            raise RuntimeError(message)
        return batch_size

    assert train() == 45 and sizes == [64, 57, 51, 45]
    assert not should_reduce_batch_size(RuntimeError("shape mismatch"))


def test_reduce_batch_size_fn_without_arguments_as_accelerate_documents():
    sizes = []
    state = {"size": 100}

    def shrink():
        state["size"] = int(state["size"] * 0.9)
        return state["size"]

    @find_executable_batch_size(starting_batch_size=100, reduce_batch_size_fn=shrink)
    def train(batch_size):
        sizes.append(batch_size)
        if batch_size > 80:
            raise torch.OutOfMemoryError("CUDA out of memory.")
        return batch_size

    assert train() == 72 and sizes == [100, 90, 81, 72]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 3)
        self.b = torch.nn.Linear(3, 2)
        self.register_buffer("kept", torch.ones(2))
        self.register_buffer("scratch", torch.zeros(2), persistent=False)

    def forward(self, x):
        return self.b(self.a(x)) + self.kept


def test_align_devices_hook_offloads_own_weights_without_weights_map():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(4, 3)
    expected = model(x)
    hook = AlignDevicesHook(execution_device="cpu", offload=True)
    add_hook_to_module(model.a, hook)
    assert model.a.weight.device.type == "meta"
    assert has_offloaded_params(model.a) and not has_offloaded_params(model.b)
    with align_module_device(model.a):
        assert model.a.weight.device.type == "cpu"
    assert model.a.weight.device.type == "meta"
    assert torch.allclose(model(x), expected)
    remove_hook_from_submodules(model)
    assert model.a.weight.device.type == "cpu"
    attach_align_device_hook(model, execution_device="cpu", offload=True)
    assert model.b.weight.device.type == "meta"
    assert torch.allclose(model(x), expected)


def test_layerwise_casting_hooks_store_low_and_compute_high():
    model = Net()
    attach_layerwise_casting_hooks(
        model,
        storage_dtype=torch.bfloat16,
        compute_dtype=torch.float32,
        skip_modules_pattern=("b",),
    )
    assert model.a.weight.dtype == torch.bfloat16 and model.b.weight.dtype == torch.float32
    assert model(torch.randn(2, 3)).dtype == torch.float32
    assert model.a.weight.dtype == torch.bfloat16


def test_named_module_tensors_remove_non_persistent_and_submodule_state_dict():
    model = Net()
    names = [n for n, _ in named_module_tensors(model, recurse=True)]
    assert "scratch" in names
    kept = [n for n, _ in named_module_tensors(model, recurse=True, remove_non_persistent=True)]
    assert "scratch" not in kept and "kept" in kept and "a.weight" in kept
    part = extract_submodules_state_dict(model.state_dict(), ["a"])
    assert sorted(part) == ["a.bias", "a.weight"]


def test_load_checkpoint_in_model_reads_a_flat_index(tmp_path):
    from safetensors.torch import save_file

    source = Net()
    state = source.state_dict()
    save_file({k: v for k, v in state.items() if k.startswith("a.")}, tmp_path / "one.safetensors")
    save_file(
        {k: v for k, v in state.items() if not k.startswith("a.")}, tmp_path / "two.safetensors"
    )
    flat = {k: ("one.safetensors" if k.startswith("a.") else "two.safetensors") for k in state}
    (tmp_path / "index.json").write_text(json.dumps(flat))
    target = Net()
    load_checkpoint_in_model(target, tmp_path / "index.json")
    assert all(torch.equal(target.state_dict()[k], v) for k, v in state.items())


def test_check_device_map_warns_about_unknown_keys():
    from accel.utils import check_device_map

    with pytest.warns(UserWarning, match="device_map keys do not match any submodules"):
        check_device_map(Net(), {"": "cpu", "decoder": "cpu"})


def test_unwrap_model_keeps_compile_and_removes_ddp_inside(tmp_path):
    script = tmp_path / "unwrap.py"
    script.write_text(
        "import torch, torch.distributed as dist\n"
        "from accel.utils import extract_model_from_parallel\n"
        "dist.init_process_group('gloo', init_method='tcp://127.0.0.1:0', rank=0, world_size=1)\n"
        "model = torch.nn.Linear(2, 2)\n"
        "compiled = torch.compile(torch.nn.parallel.DistributedDataParallel(model))\n"
        "out = extract_model_from_parallel(compiled, keep_torch_compile=True)\n"
        "assert out is compiled and out._orig_mod is model, type(out._orig_mod)\n"
        "assert extract_model_from_parallel(compiled, keep_torch_compile=False) is model\n"
        "print('unwrapped')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0 and "unwrapped" in done.stdout, done.stderr[-3000:]


def test_accel_torch_device_forces_the_device(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env["ACCEL_TORCH_DEVICE"] = "meta"
    done = subprocess.run(
        [sys.executable, "-c", "from accel import PartialState; print(PartialState().device)"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("meta"), done.stdout


def test_top_level_and_utils_names_of_accelerate():
    import accel
    import accel.utils as utils

    assert accel.synchronize_rng_states is utils.synchronize_rng_states
    assert accel.ParallelismConfig.__module__ == "accel.parallelism_config"
    assert utils.listify({"a": torch.tensor([1, 2])}) == {"a": [1, 2]}
    assert utils.dtype_byte_size(torch.float16) == 2 and utils.dtype_byte_size(torch.bool) == 0.125
    assert utils.convert_file_size_to_int("2KiB") == 2048
    assert utils.convert_dict_to_env_variables({"A": "1", "B C": "2", "D": ""}) == ["A=1\n"]
    padded = utils.pad_input_tensors(torch.arange(3), batch_size=3, num_processes=2)
    assert padded.tolist() == [0, 1, 2, 2]
    half = utils.convert_outputs_to_fp32(lambda: torch.ones(1, dtype=torch.float16))
    assert half().dtype == torch.float32
    os.environ["ACCEL_ISSUE19_PROBE"] = "1"
    with utils.clear_environment():
        assert "ACCEL_ISSUE19_PROBE" not in os.environ
    assert os.environ.pop("ACCEL_ISSUE19_PROBE") == "1"
    assert utils.is_torch_version(">=", "2.0") and isinstance(utils.is_bf16_available(), bool)
    assert utils.is_xpu_available() in (True, False) and utils.is_torch_xla_available() in (
        True,
        False,
    )
