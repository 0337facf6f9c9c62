"""``accelerator.save_model`` of a quantized model, and loading it back with load_and_quantize_model."""

from __future__ import annotations

import bitsandbytes as bnb
import pytest
import torch
from accel import Accelerator
from accel.utils import BnbQuantizationConfig
from accel.utils.modeling import load_weights
from bnb_testing import DEVICE_MAP, logits, quantize
from safetensors import safe_open


@pytest.fixture(scope="module")
def accelerator() -> Accelerator:
    return Accelerator(cpu=True)


def test_8bit_round_trip(checkpoint, tokens, tmp_path, accelerator):
    config = BnbQuantizationConfig(load_in_8bit=True)
    model = quantize(checkpoint, config)
    before = logits(model, tokens)
    accelerator.save_model(model, tmp_path / "int8", max_shard_size="200KB")
    saved = load_weights(tmp_path / "int8")
    assert saved["transformer.h.0.mlp.c_fc.weight"].dtype == torch.int8
    assert saved["transformer.h.0.mlp.c_fc.SCB"].dtype == torch.float32
    assert len(list((tmp_path / "int8").glob("*.safetensors"))) > 1  # sharded

    again = quantize(tmp_path / "int8", config, device_map="auto")
    assert isinstance(again.transformer.h[0].mlp["c_fc"], bnb.nn.Linear8bitLt)
    assert torch.equal(logits(again, tokens), before)
    for name, tensor in again.state_dict().items():
        assert torch.equal(tensor, saved[name]), name
    # an 8-bit checkpoint can also be loaded with disk offload
    offloaded = quantize(
        tmp_path / "int8", config, device_map=DEVICE_MAP, offload_folder=tmp_path / "off"
    )
    assert torch.equal(logits(offloaded, tokens), before)


def test_8bit_checkpoint_needs_the_same_config(checkpoint, tmp_path, accelerator):
    model = quantize(checkpoint, BnbQuantizationConfig(load_in_8bit=True))
    accelerator.save_model(model, tmp_path)
    with pytest.raises(ValueError, match="not a 4-bit bitsandbytes weight"):
        quantize(tmp_path, BnbQuantizationConfig(load_in_4bit=True))
    with pytest.raises(ValueError, match="stored quantized .* but this layer is not quantized"):
        quantize(
            tmp_path, BnbQuantizationConfig(load_in_8bit=True, skip_modules=["lm_head", "h.0"])
        )


@pytest.mark.parametrize("double", [False, True])
def test_4bit_round_trip(checkpoint, tokens, tmp_path, accelerator, double):
    config = BnbQuantizationConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=double
    )
    model = quantize(checkpoint, config)
    # saved before the first forward, which may repack 4-bit weights for the CPU kernel
    accelerator.save_model(model, tmp_path)
    before = logits(model, tokens)
    with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as f:
        keys = set(f.keys())
    assert "transformer.h.0.mlp.c_fc.weight.quant_state.bitsandbytes__nf4" in keys
    again = quantize(tmp_path, config)
    layer = again.transformer.h[0].mlp["c_fc"]
    assert isinstance(layer, bnb.nn.Linear4bit) and layer.weight.quant_state.nested == double
    assert torch.equal(logits(again, tokens), before)
    with pytest.raises(ValueError, match="stored quantized"):
        quantize(tmp_path, BnbQuantizationConfig(load_in_4bit=True, skip_modules=["lm_head", "h"]))


def test_seed_example(checkpoint, tokens, tmp_path):
    """The seed's quantization walk-through, with ``accelerate`` replaced by ``accel``."""
    from accel import Accelerator, init_empty_weights
    from accel.utils import BnbQuantizationConfig, load_and_quantize_model
    from bnb_testing import GPT

    with init_empty_weights():
        empty_model = GPT()
    bnb_quantization_config = BnbQuantizationConfig(load_in_8bit=True, llm_int8_threshold=6)
    quantized_model = load_and_quantize_model(
        empty_model, weights_location=checkpoint, bnb_quantization_config=bnb_quantization_config
    )
    before = logits(quantized_model.eval(), tokens)
    accelerate = Accelerator()
    new_weights_location = tmp_path / "save_directory"
    accelerate.save_model(quantized_model, new_weights_location)
    quantized_model_from_saved = load_and_quantize_model(
        empty_model,
        weights_location=new_weights_location,
        bnb_quantization_config=bnb_quantization_config,
        device_map="auto",
    )
    assert torch.equal(logits(quantized_model_from_saved.eval(), tokens), before)
