"""Big-model inference: empty models, checkpoint loading, dispatch over CPU and disk."""

from __future__ import annotations

import json
import os

import psutil
import pytest
import torch
from accel import (
    cpu_offload,
    disk_offload,
    dispatch_model,
    init_empty_weights,
    init_on_device,
    load_checkpoint_and_dispatch,
)
from accel.big_model.dispatch import cpu_offload_with_hook
from accel.big_model.hooks import remove_hook_from_module
from accel.errors import CheckpointError
from accel.progress import progress_bar
from accel.utils import load_checkpoint_in_model, save_weights
from torch import nn


def assert_same(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Bit-identical outputs (torch.testing is slow to import on a small machine)."""
    assert torch.equal(actual, expected), (actual - expected).abs().max()


def test_init_empty_weights_allocates_nothing():
    process = psutil.Process()
    before = process.memory_info().rss
    with init_empty_weights():
        model = nn.Sequential(*[nn.Linear(2048, 2048) for _ in range(24)])  # ~400 MB in fp32
        model.register_buffer("steps", torch.arange(4))
    grown = process.memory_info().rss - before
    sizes = [p.numel() * p.element_size() for p in model.parameters()]
    assert sum(sizes) > 400e6
    assert all(p.device.type == "meta" for p in model.parameters())
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in model.parameters())
    assert model.steps.device.type == "cpu"  # buffers stay real by default
    assert grown < 50e6, f"building an empty model grew RSS by {grown / 1e6:.0f} MB"
    # The patch is gone once the block ends.
    assert nn.Linear(2, 2).weight.device.type == "cpu"


def test_init_empty_weights_include_buffers_and_init_on_device():
    with init_empty_weights(include_buffers=True):
        model = nn.BatchNorm1d(4)
        extra = torch.ones(3)
    assert model.running_mean.device.type == "meta" and extra.device.type == "meta"
    with init_on_device("cpu"):
        layer = nn.Linear(3, 3)
    assert layer.weight.device.type == "cpu"


def test_cpu_and_disk_outputs_match_full_model(
    tmp_path, reference, sharded_checkpoint, empty_model
):
    model, ids, expected = reference
    empty = empty_model()
    offload = tmp_path / "offload"
    dispatched = load_checkpoint_and_dispatch(
        empty,
        sharded_checkpoint,
        device_map="auto",
        max_memory={"cpu": "30KB"},
        no_split_module_classes=["Block"],
        offload_folder=offload,
    )
    placement = set(dispatched.hf_device_map.values())
    assert placement == {"cpu", "disk"}, dispatched.hf_device_map
    index = json.loads((offload / "index.json").read_text())
    disk_names = [n for n in index if n.startswith("blocks.")]
    assert disk_names
    # Offloaded weights are not held by the model between forwards.
    assert dispatched.get_parameter(disk_names[0]).device.type == "meta"
    with torch.no_grad():
        for _ in range(2):
            assert_same(dispatched(ids), expected)
    assert dispatched.get_parameter(disk_names[0]).device.type == "meta"
    with pytest.raises(RuntimeError, match="remove_hook_from_module"):
        dispatched.to("cpu")


def test_bin_checkpoint_offloaded_to_memmap_files(tmp_path, reference, empty_model):
    model, ids, expected = reference
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    device_map = {"embed": "cpu", "blocks.0": "cpu", "blocks.1": "cpu", "blocks.2": "disk"}
    device_map.update({"blocks.3": "disk", "norm": "disk", "head": "cpu"})
    offload = tmp_path / "offload"
    dispatched = load_checkpoint_and_dispatch(
        empty_model(), tmp_path, device_map=device_map, offload_folder=offload
    )
    index = json.loads((offload / "index.json").read_text())
    assert (offload / "blocks.2.fc1.weight.dat").stat().st_size == 32 * 32 * 4
    assert index["blocks.2.fc1.weight"] == {"dtype": "float32", "shape": [32, 32]}
    with torch.no_grad():
        assert_same(dispatched(ids), expected)


def test_tied_weights_remain_one_tensor(tmp_path, reference, sharded_checkpoint, empty_model):
    model, ids, expected = reference
    loaded = load_checkpoint_and_dispatch(empty_model(), sharded_checkpoint, device_map={"": "cpu"})
    assert loaded.head.weight is loaded.embed.weight
    with torch.no_grad():
        assert_same(loaded(ids), expected)

    # A torch.save checkpoint holds both names; still one tensor after loading.
    torch.save(model.state_dict(), tmp_path / "both.bin")
    empty = empty_model()
    load_checkpoint_in_model(empty, tmp_path / "both.bin")
    assert empty.head.weight is empty.embed.weight
    assert empty.embed.weight.device.type == "cpu"

    # An "auto" map keeps the tied head with the embedding even when the head comes last.
    empty = empty_model()
    offload = tmp_path / "offload"
    dispatched = load_checkpoint_and_dispatch(
        empty,
        sharded_checkpoint,
        device_map="sequential",
        max_memory={"cpu": "16KB"},
        no_split_module_classes=["Block"],
        offload_folder=offload,
    )
    device_map = dispatched.hf_device_map
    assert device_map["embed"] == device_map["head"] == "cpu", device_map
    with torch.no_grad():
        assert_same(dispatched(ids), expected)


def test_tied_weights_on_disk_stored_once(tmp_path, reference, sharded_checkpoint, empty_model):
    model, ids, expected = reference
    offload = tmp_path / "offload"
    dispatched = load_checkpoint_and_dispatch(
        empty_model(),
        sharded_checkpoint,
        device_map={"": "disk"},
        offload_folder=offload,
        dtype=torch.float16,  # forces real copies in the offload folder
        keep_in_fp32_modules=["norm"],
    )
    index = json.loads((offload / "index.json").read_text())
    assert index["head.weight"]["file"] == "embed.weight.dat"
    assert not (offload / "head.weight.dat").exists()
    assert index["norm.weight"]["dtype"] == "float32"
    assert index["blocks.0.fc1.weight"]["dtype"] == "float16"
    remove_hook_from_module(dispatched, recurse=True)
    assert dispatched.head.weight is dispatched.embed.weight
    assert dispatched.embed.weight.dtype == torch.float16
    assert dispatched.norm.weight.dtype == torch.float32


def test_sharded_safetensors_with_index_loads(reference, sharded_checkpoint, empty_model):
    model, ids, expected = reference
    for target in (sharded_checkpoint, sharded_checkpoint / "model.safetensors.index.json"):
        empty = empty_model()
        load_checkpoint_in_model(empty, target, strict=True)
        assert all(p.device.type == "cpu" for p in empty.parameters())
        with torch.no_grad():
            assert_same(empty(ids), expected)


def test_dtype_and_keep_in_fp32_modules(tmp_path, reference, sharded_checkpoint, empty_model):
    model, ids, expected = reference
    empty = empty_model()
    load_checkpoint_in_model(
        empty, sharded_checkpoint, dtype="bfloat16", keep_in_fp32_modules=["norm"]
    )
    assert empty.blocks[0].fc1.weight.dtype == torch.bfloat16
    assert empty.norm.weight.dtype == torch.float32
    assert empty.blocks[0].scale.dtype == torch.bfloat16  # floating buffers follow dtype


def test_malicious_bin_is_refused(tmp_path, empty_model):
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path = tmp_path / "pytorch_model.bin"
    torch.save({"embed.weight": torch.zeros(40, 32), "payload": Exploit()}, path)
    with pytest.raises(CheckpointError, match="refusing to load"):
        load_checkpoint_in_model(empty_model(), path)
    with pytest.raises(CheckpointError, match="refusing to load"):
        load_checkpoint_and_dispatch(empty_model(), tmp_path, device_map="auto")
    assert not marker.exists()


def test_offload_state_dict_bin_and_strict(tmp_path, reference, empty_model):
    model, ids, expected = reference
    save_weights(model.state_dict(), tmp_path, max_shard_size="20KB", safe_serialization=False)
    empty = empty_model()
    load_checkpoint_in_model(empty, tmp_path, offload_state_dict=True, strict=True)
    with torch.no_grad():
        assert_same(empty(ids), expected)

    partial = {k: v for k, v in model.state_dict().items() if not k.startswith("norm")}
    torch.save(partial, tmp_path / "partial.bin")
    with pytest.raises(CheckpointError, match="norm.weight"):
        load_checkpoint_in_model(empty_model(), tmp_path / "partial.bin", strict=True)


def test_missing_offload_folder_and_bad_strategy(sharded_checkpoint, empty_model):
    with pytest.raises(ValueError, match="offload_folder"):
        load_checkpoint_and_dispatch(empty_model(), sharded_checkpoint, device_map={"": "disk"})
    with pytest.raises(ValueError, match="balanced_low_0"):
        load_checkpoint_and_dispatch(empty_model(), sharded_checkpoint, device_map="fastest")
    with pytest.raises(ValueError, match="does not place"):
        load_checkpoint_and_dispatch(empty_model(), sharded_checkpoint, device_map={"embed": "cpu"})


def test_cpu_offload_disk_offload_and_hook_removal(tmp_path, reference, model_factory):
    model, ids, expected = reference
    offloaded = cpu_offload(model_factory(), execution_device="cpu")
    assert offloaded.blocks[0].fc1.weight.device.type == "meta"
    with torch.no_grad():
        assert_same(offloaded(ids), expected)
    remove_hook_from_module(offloaded, recurse=True)
    assert offloaded.blocks[0].fc1.weight.device.type == "cpu"
    assert "forward" not in offloaded.__dict__
    with torch.no_grad():
        assert_same(offloaded(ids), expected)

    on_disk = disk_offload(model_factory(), tmp_path / "disk", execution_device="cpu")
    assert (tmp_path / "disk" / "index.json").exists()
    assert on_disk.blocks[1].fc2.weight.device.type == "meta"
    with torch.no_grad():
        assert_same(on_disk(ids), expected)


def test_cpu_offload_with_hook_chain(reference, model_factory):
    model, ids, expected = reference
    first, hook1 = cpu_offload_with_hook(model_factory(), execution_device="cpu")
    second, hook2 = cpu_offload_with_hook(
        nn.Identity(), execution_device="cpu", prev_module_hook=hook1
    )
    with torch.no_grad():
        assert_same(second(first(ids)), expected)
    hook2.offload()
    hook1.remove()
    assert "forward" not in first.__dict__


def test_dispatch_model_without_accelerator_errors_clearly(model_factory):
    if torch.cuda.is_available():
        pytest.skip("checks the message given on a machine without a CUDA GPU")
    model = model_factory()
    with pytest.raises(ValueError, match="accelerator"):
        dispatch_model(model, {"embed": 0, "blocks": "cpu", "norm": "cpu", "head": 0})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_dispatch_gpu_and_cpu_offload(tmp_path, reference, sharded_checkpoint, empty_model):
    model, ids, expected = reference
    device_map = {"embed": 0, "blocks": "cpu", "norm": "disk", "head": 0}
    dispatched = load_checkpoint_and_dispatch(
        empty_model(), sharded_checkpoint, device_map=device_map, offload_folder=tmp_path / "o"
    )
    assert dispatched.embed.weight.device.type == "cuda"
    assert dispatched.head.weight is dispatched.embed.weight
    with torch.no_grad():
        output = dispatched(ids)
    assert output.device.type == "cpu"
    assert torch.allclose(output, expected, rtol=1e-4, atol=1e-4)


def test_progress_bar_only_on_a_terminal_main_process(monkeypatch):
    files = ["a.safetensors", "b.safetensors"]
    monkeypatch.setattr("sys.stderr.isatty", lambda: False, raising=False)
    assert progress_bar(files, "x") is files
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    bar = progress_bar(files, "x")
    assert bar is not files and list(bar) == files
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert progress_bar(files, "x") is files


def test_unused_checkpoint_weights_are_logged(tmp_path, caplog):
    """The warning says, in transformers' and Accelerate's words, which weights were not used."""
    model = nn.Linear(3, 4)
    state = dict(model.state_dict(), foo=torch.rand(4, 5))
    torch.save(state, tmp_path / "weights.pt")
    with caplog.at_level("WARNING"):
        load_checkpoint_in_model(nn.Linear(3, 4), str(tmp_path / "weights.pt"))
    assert "were not used when initializing Linear" in caplog.text and "foo" in caplog.text
