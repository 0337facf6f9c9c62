"""BnbQuantizationConfig: defaults, conversions, and clear errors for bad values and combinations."""

from __future__ import annotations

import pytest
import torch
from accel_bnb.config import BnbQuantizationConfig


def test_seed_examples():
    eight = BnbQuantizationConfig(load_in_8bit=True, llm_int8_threshold=6)
    assert eight.target_dtype == torch.int8 and eight.llm_int8_threshold == 6.0
    assert eight.quantization_bits == 8
    four = BnbQuantizationConfig(
        load_in_4bit=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
        bnb_4bit_use_double_quant=True,
        bnb_4bit_quant_type="nf4",
    )
    assert four.target_dtype == "int4" and four.quantization_bits == 4
    assert four.bnb_4bit_compute_dtype is torch.bfloat16
    assert four.to_dict()["bnb_4bit_compute_dtype"] == "bfloat16"


def test_dtype_names_and_lists():
    config = BnbQuantizationConfig(
        load_in_4bit=True,
        bnb_4bit_compute_dtype="bf16",
        torch_dtype="float16",
        skip_modules=("lm_head",),
        keep_in_fp32_modules=["ln_f"],
    )
    assert config.bnb_4bit_compute_dtype is torch.bfloat16
    assert config.torch_dtype is torch.float16
    assert config.skip_modules == ["lm_head"] and config.keep_in_fp32_modules == ["ln_f"]
    assert BnbQuantizationConfig(load_in_4bit=True).bnb_4bit_compute_dtype is torch.float32


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "set load_in_8bit=True or load_in_4bit=True"),
        ({"load_in_8bit": True, "load_in_4bit": True}, "cannot both be True"),
        ({"load_in_8bit": "yes"}, "load_in_8bit must be True or False"),
        ({"load_in_4bit": True, "bnb_4bit_quant_type": "int4"}, "bnb_4bit_quant_type='int4'"),
        ({"load_in_4bit": True, "bnb_4bit_compute_dtype": "int8"}, "bnb_4bit_compute_dtype"),
        ({"load_in_4bit": True, "torch_dtype": torch.int32}, "torch_dtype"),
        ({"load_in_8bit": True, "llm_int8_threshold": -1}, "llm_int8_threshold must be"),
        ({"load_in_8bit": True, "llm_int8_threshold": "6"}, "llm_int8_threshold must be"),
        ({"load_in_8bit": True, "skip_modules": "lm_head"}, "skip_modules must be a list"),
        ({"load_in_8bit": True, "keep_in_fp32_modules": [1]}, "keep_in_fp32_modules"),
        ({"load_in_8bit": True, "bnb_4bit_quant_type": "nf4"}, "only apply to 4-bit"),
        ({"load_in_8bit": True, "bnb_4bit_use_double_quant": True}, "only apply to 4-bit"),
        ({"load_in_4bit": True, "llm_int8_threshold": 3.0}, "only applies to 8-bit"),
    ],
)
def test_bad_configs(kwargs, message):
    with pytest.raises(ValueError, match="BnbQuantizationConfig") as info:
        BnbQuantizationConfig(**kwargs)
    assert message in str(info.value)
