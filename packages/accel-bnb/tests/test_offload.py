"""Device maps with CPU and disk offload: 8-bit offloaded layers are int8 on disk, 4-bit ones
stay in torch_dtype; outputs match the model that is not offloaded."""

from __future__ import annotations

import json

import bitsandbytes as bnb
import pytest
import torch
from accel import init_empty_weights
from accel.utils import BnbQuantizationConfig, load_and_quantize_model
from accel_bnb import memory_report
from accel_bnb.loading import is_offloaded
from accel_bnb.quantizer import plan_device_map
from accel_bnb.replace import default_skip_modules, layers_to_quantize
from bnb_testing import DEVICE_MAP, GPT, logits, quantize, relative_error


def test_offloaded_means_off_the_running_device():
    assert is_offloaded("disk", "cpu") and is_offloaded("disk", 0)
    assert is_offloaded("cpu", 0) and not is_offloaded("cpu", "cpu")
    assert not is_offloaded(0, 0)


def test_8bit_disk_offload(checkpoint, reference_logits, tokens, tmp_path):
    config = BnbQuantizationConfig(load_in_8bit=True)
    plain = logits(quantize(checkpoint, config), tokens)
    model = quantize(checkpoint, config, device_map=DEVICE_MAP, offload_folder=tmp_path)
    index = json.loads((tmp_path / "index.json").read_text())
    assert index["transformer.h.3.mlp.c_fc.weight"]["dtype"] == "int8"
    assert index["transformer.h.3.mlp.c_fc.bias"]["dtype"] == "float32"
    assert index["transformer.ln_f.weight"]["dtype"] == "float32"
    offloaded = model.transformer.h[3].mlp["c_fc"]
    assert isinstance(offloaded, bnb.nn.Linear8bitLt) and offloaded.weight.device.type == "meta"
    assert model.transformer.h[0].mlp["c_fc"].weight.dtype == torch.int8
    first, second = logits(model, tokens), logits(model, tokens)
    assert torch.equal(first, plain) and torch.equal(second, plain)
    assert offloaded.weight.device.type == "meta" and offloaded.state.CB is None
    assert relative_error(first, reference_logits) < 0.05
    report = memory_report(model)
    assert report.quantized_layers == 16 and report.offloaded_tensors > 0
    assert report.total_bytes < memory_report(quantize(checkpoint, config)).total_bytes / 1.5


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
def test_4bit_offloaded_modules_keep_torch_dtype(
    checkpoint, reference_logits, tokens, tmp_path, dtype
):
    config = BnbQuantizationConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", torch_dtype=dtype)
    model = quantize(checkpoint, config, device_map=DEVICE_MAP, offload_folder=tmp_path)
    index = json.loads((tmp_path / "index.json").read_text())
    kept = "bfloat16" if dtype else "float32"
    assert index["transformer.h.3.mlp.c_fc.weight"]["dtype"] == kept
    assert type(model.transformer.h[3].mlp["c_fc"]) is torch.nn.Linear
    assert isinstance(model.transformer.h[1].mlp["c_fc"], bnb.nn.Linear4bit)
    assert memory_report(model).quantized_layers == 8
    if dtype is None:
        assert relative_error(logits(model, tokens), reference_logits) < 0.35


def test_auto_device_map_spills_8bit_layers_to_disk(checkpoint, tokens, tmp_path):
    config = BnbQuantizationConfig(load_in_8bit=True)
    plain = logits(quantize(checkpoint, config), tokens)
    model = quantize(
        checkpoint,
        config,
        device_map="auto",
        max_memory={"cpu": "500KB"},
        no_split_module_classes=["Block"],
        offload_folder=tmp_path,
    )
    assert "disk" in model.hf_device_map.values() and "cpu" in model.hf_device_map.values()
    assert torch.equal(logits(model, tokens), plain)


def test_4bit_auto_offload_is_refused(checkpoint, tmp_path, empty_model):
    with pytest.raises(ValueError, match="offloads part of the 4-bit model"):
        load_and_quantize_model(
            empty_model,
            bnb_quantization_config=BnbQuantizationConfig(load_in_4bit=True),
            weights_location=checkpoint,
            device_map="auto",
            max_memory={"cpu": "300KB"},
            offload_folder=tmp_path,
        )


def test_disk_needs_offload_folder(checkpoint, empty_model):
    with pytest.raises(ValueError, match="pass offload_folder="):
        load_and_quantize_model(
            empty_model,
            bnb_quantization_config=BnbQuantizationConfig(load_in_8bit=True),
            weights_location=checkpoint,
            device_map=DEVICE_MAP,
        )


def test_gpu_device_map_is_planned_with_cpu_offload():
    """With an accelerator running the model, ``"cpu"`` entries are offloaded too (planning only)."""
    with init_empty_weights():
        model = GPT()
    quantized = layers_to_quantize(model, default_skip_modules(model))
    budget = {0: "700KB", "cpu": "1MB", "disk": "1GB"}
    config = BnbQuantizationConfig(load_in_8bit=True)
    planned = plan_device_map(model, config, "auto", quantized, budget, ["Block"])
    assert {0, "cpu"} <= set(planned.values())
    assert planned["transformer.wte"] == 0
    # counted in fp32, the same budget would hold fewer blocks on the accelerator
    unquantized = plan_device_map(model, config, "auto", [], budget, ["Block"])
    on_gpu = [n for n, d in planned.items() if d == 0]
    assert len([n for n, d in unquantized.items() if d == 0]) < len(on_gpu)
    four = BnbQuantizationConfig(load_in_4bit=True)
    with pytest.raises(ValueError, match="offloads part of the 4-bit model"):
        plan_device_map(model, four, "auto", quantized, budget, ["Block"])


def test_cpu_offload_keeps_int8_weights_in_ram(checkpoint):
    """When an accelerator runs the model, CPU-mapped 8-bit layers are quantized into RAM.

    Loading alone is exercised here (running needs the accelerator): every weight of a
    ``{"": "cpu"}`` map with main device 0 is offloaded to the loader's RAM store.
    """
    from accel_bnb.loading import QuantizedLoader, checkpoint_tensors
    from accel_bnb.replace import replace_with_bnb_layers

    with init_empty_weights():
        model = GPT()
    dtypes = {n: t.dtype for n, t in model.state_dict().items()}
    config = BnbQuantizationConfig(load_in_8bit=True)
    replace_with_bnb_layers(model, config, layers_to_quantize(model, default_skip_modules(model)))
    loader = QuantizedLoader(model, config, {"": "cpu"}, 0, None, dtypes)
    for name, tensor in checkpoint_tensors(checkpoint):
        loader.add(name, tensor)
    loader.finish()
    assert loader.ram["transformer.h.0.mlp.c_fc.weight"].dtype == torch.int8
    assert loader.ram["transformer.h.0.mlp.c_fc.bias"].dtype == torch.float32
    assert loader.ram["lm_head.weight"] is loader.ram["transformer.wte.weight"]
    assert loader.int8_scales["transformer.h.0.mlp.c_fc"].shape == (512,)
    assert all(p.device.type == "meta" for p in model.parameters())


def test_tied_weights_stored_under_the_offloaded_name(reference, tokens, tmp_path):
    """A checkpoint storing the tied embedding only as ``lm_head.weight`` (mapped to disk)
    still gives the CPU-mapped embedding its data."""
    from safetensors.torch import save_file

    state = {k: v.contiguous() for k, v in reference.state_dict().items()}
    state.pop("transformer.wte.weight")
    save_file(state, str(tmp_path / "model.safetensors"))
    config = BnbQuantizationConfig(load_in_8bit=True)
    model = quantize(tmp_path, config, device_map=DEVICE_MAP, offload_folder=tmp_path / "off")
    assert model.transformer.wte.weight.device.type == "cpu"
    assert torch.equal(model.transformer.wte.weight, reference.transformer.wte.weight)
    assert torch.equal(logits(model, tokens), logits(quantize(tmp_path, config), tokens))
