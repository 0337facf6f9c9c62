"""8-bit and 4-bit quantization of a tied GPT: layers, accuracy, memory, skipped modules.

Tolerances (relative Frobenius error of the logits against fp32, 4 blocks, random weights):
8-bit <= 5%, 4-bit (nf4 / fp4, with or without double quantization) <= 35%.
"""

from __future__ import annotations

import bitsandbytes as bnb
import pytest
import torch
from accel import init_empty_weights
from accel.utils import BnbQuantizationConfig, load_and_quantize_model
from accel_bnb import default_skip_modules, get_memory_footprint, memory_report
from bnb_testing import GPT, linear_names, logits, quantize, relative_error

FOUR_BIT = [
    pytest.param(quant_type, double, id=f"{quant_type}-{'dq' if double else 'nodq'}")
    for quant_type in ("nf4", "fp4")
    for double in (False, True)
]


def linear_bytes(model) -> int:
    return sum(
        p.numel() * p.element_size()
        for n, p in model.named_parameters()
        if n.rpartition(".")[0] in linear_names(model)
    )


def test_default_skip_modules_are_the_tied_head(empty_model):
    assert default_skip_modules(empty_model) == ["transformer.wte", "lm_head"]


def test_8bit(checkpoint, reference, reference_logits, tokens):
    model = quantize(checkpoint, BnbQuantizationConfig(load_in_8bit=True, llm_int8_threshold=6))
    for name in linear_names(model):
        layer = model.get_submodule(name)
        assert isinstance(layer, bnb.nn.Linear8bitLt), name
        assert layer.weight.dtype == torch.int8 and layer.weight.SCB.dtype == torch.float32
    # the tied embedding / head stay full precision and tied
    assert type(model.lm_head) is torch.nn.Linear
    assert model.lm_head.weight is model.transformer.wte.weight
    assert model.lm_head.weight.dtype == torch.float32
    assert torch.equal(model.lm_head.weight, reference.lm_head.weight)
    assert relative_error(logits(model, tokens), reference_logits) < 0.05

    report = memory_report(model)
    assert report.quantized_layers == len(linear_names(model)) == 16
    fp32_linear = linear_bytes(reference)
    # int8 weights + fp32 biases and row scales: close to a quarter of the fp32 bytes
    assert 3.7 < fp32_linear / report.quantized_bytes < 4.0
    assert report.unquantized_bytes == get_memory_footprint(reference) - fp32_linear
    assert get_memory_footprint(model) == report.total_bytes
    assert get_memory_footprint(reference) / report.total_bytes > 3.0
    assert "16 quantized layers" in str(report)


@pytest.mark.parametrize(("quant_type", "double"), FOUR_BIT)
def test_4bit(checkpoint, reference, reference_logits, tokens, quant_type, double):
    config = BnbQuantizationConfig(
        load_in_4bit=True, bnb_4bit_quant_type=quant_type, bnb_4bit_use_double_quant=double
    )
    model = quantize(checkpoint, config)
    for name in linear_names(model):
        layer = model.get_submodule(name)
        assert isinstance(layer, bnb.nn.Linear4bit), name
        state = layer.weight.quant_state
        assert layer.weight.dtype == torch.uint8 and state.quant_type == quant_type
        assert state.nested == double
    assert type(model.lm_head) is torch.nn.Linear
    assert model.lm_head.weight is model.transformer.wte.weight
    # measured before the first forward: on CPUs with AVX512-BF16, bitsandbytes repacks the
    # weights for its CPU kernel (and expands double-quantized scales) when the model first runs
    report = memory_report(model)
    ratio = linear_bytes(reference) / report.quantized_bytes
    # 4 bits per weight plus block scales: fp32 absmax per 64 values (or 8-bit with double quant)
    assert (6.0 < ratio < 8.0) if not double else (6.8 < ratio < 8.0)
    assert relative_error(logits(model, tokens), reference_logits) < 0.35


def test_double_quant_saves_memory(checkpoint):
    sizes = [
        memory_report(
            quantize(
                checkpoint, BnbQuantizationConfig(load_in_4bit=True, bnb_4bit_use_double_quant=d)
            )
        ).quantized_bytes
        for d in (False, True)
    ]
    assert sizes[1] < sizes[0]


def test_skip_and_fp32_modules(checkpoint):
    config = BnbQuantizationConfig(
        load_in_8bit=True,
        torch_dtype=torch.bfloat16,
        skip_modules=["lm_head", "transformer.wte", "c_attn"],
        keep_in_fp32_modules=["h.3"],
    )
    model = quantize(checkpoint, config)
    for index, block in enumerate(model.transformer.h):
        assert type(block.attn.c_attn) is torch.nn.Linear
        assert block.attn.c_attn.weight.dtype == (torch.float32 if index == 3 else torch.bfloat16)
        assert isinstance(block.mlp["c_fc"], bnb.nn.Linear8bitLt) is (index != 3)
        assert block.ln_1.weight.dtype == (torch.float32 if index == 3 else torch.bfloat16)
    assert model.lm_head.weight.dtype == torch.bfloat16
    assert model.transformer.h[0].mlp["c_fc"].bias.dtype == torch.bfloat16


def test_skip_modules_run(checkpoint, reference_logits, tokens):
    config = BnbQuantizationConfig(load_in_4bit=True, skip_modules=["lm_head", "wte", "h.0"])
    model = quantize(checkpoint, config)
    assert all(
        type(m) is torch.nn.Linear
        for m in model.transformer.h[0].modules()
        if isinstance(m, torch.nn.Linear)
    )
    assert memory_report(model).quantized_layers == 12
    assert relative_error(logits(model, tokens), reference_logits) < 0.35


def test_quantize_a_loaded_model_in_place(reference, reference_logits, tokens):
    model = GPT()
    model.load_state_dict(reference.state_dict())
    model = load_and_quantize_model(
        model, bnb_quantization_config=BnbQuantizationConfig(load_in_4bit=True)
    ).eval()
    assert isinstance(model.transformer.h[0].mlp["c_fc"], bnb.nn.Linear4bit)
    assert model.is_loaded_in_4bit and not model.is_loaded_in_8bit
    assert relative_error(logits(model, tokens), reference_logits) < 0.35


def test_usage_errors(checkpoint, empty_model, tmp_path):
    config = BnbQuantizationConfig(load_in_8bit=True)
    with pytest.raises(ValueError, match="pass weights_location="):
        load_and_quantize_model(empty_model, bnb_quantization_config=config)
    with pytest.raises(ValueError, match="does not exist"):
        load_and_quantize_model(
            empty_model, bnb_quantization_config=config, weights_location=tmp_path / "nope"
        )
    with pytest.raises(ValueError, match="device_map='fast'"):
        load_and_quantize_model(
            empty_model,
            bnb_quantization_config=config,
            weights_location=checkpoint,
            device_map="fast",
        )
    with pytest.raises(TypeError, match="must be a BnbQuantizationConfig"):
        from accel_bnb import BnbQuantizer

        BnbQuantizer().quantize(empty_model, {"load_in_8bit": True}, checkpoint)
    # a checkpoint lacking weights of the model
    from accel.utils.modeling import save_weights

    partial = {k: v for k, v in GPT().state_dict().items() if ".h.3." not in k}
    save_weights(partial, tmp_path / "partial")
    with init_empty_weights():
        model = GPT()
    with pytest.raises(ValueError, match="weights_location lacks 12 weights"):
        load_and_quantize_model(
            model, bnb_quantization_config=config, weights_location=tmp_path / "partial"
        )


def test_4bit_bfloat16_compute(checkpoint, reference_logits, tokens):
    config = BnbQuantizationConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
    )
    model = quantize(checkpoint, config)
    assert model.transformer.h[0].mlp["c_fc"].compute_dtype is torch.bfloat16
    out = logits(model, tokens)
    assert out.dtype == torch.float32  # computed in bfloat16, returned in the input's dtype
    assert relative_error(out, reference_logits) < 0.35


@pytest.mark.parametrize("bits", [8, 4])
def test_bfloat16_torch_dtype_runs(checkpoint, reference_logits, tokens, bits):
    config = BnbQuantizationConfig(
        load_in_8bit=bits == 8,
        load_in_4bit=bits == 4,
        torch_dtype=torch.bfloat16,
        **({"bnb_4bit_compute_dtype": "bf16"} if bits == 4 else {}),
    )
    model = quantize(checkpoint, config)
    assert model.transformer.wte.weight.dtype == torch.bfloat16
    assert model.transformer.h[0].ln_1.weight.dtype == torch.bfloat16
    out = logits(model, tokens)
    assert out.dtype == torch.bfloat16
    assert relative_error(out.float(), reference_logits) < (0.06 if bits == 8 else 0.35)
