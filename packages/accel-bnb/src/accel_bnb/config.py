"""``BnbQuantizationConfig``: what to quantize with bitsandbytes, and how; validated on creation."""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch
from accel.precision import dtype_of

QUANT_TYPES = ("fp4", "nf4")
"""Values of ``bnb_4bit_quant_type``."""

_DEFAULT_THRESHOLD = 6.0


def _dtype(key: str, value: object) -> torch.dtype:
    """``value`` (a floating torch dtype, its name, or a precision name: see
    :func:`accel.precision.dtype_of`) as a torch dtype, or a ValueError naming ``key``."""
    try:
        dtype = dtype_of(value) if isinstance(value, (str, torch.dtype)) else None
    except ValueError:
        dtype = None
    if dtype in (torch.float32, torch.float16, torch.bfloat16):
        return dtype
    raise ValueError(
        f"BnbQuantizationConfig: {key}={value!r} is not supported; use torch.float32, "
        "torch.float16 or torch.bfloat16 (or 'fp32', 'fp16', 'bf16')"
    )


def _names(key: str, value: Iterable[str] | None) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise ValueError(
            f"BnbQuantizationConfig: {key} must be a list of module names "
            f"(e.g. ['lm_head']), got {value!r}"
        )
    return list(value)


@dataclass
class BnbQuantizationConfig:
    """How :func:`accel.utils.load_and_quantize_model` quantizes a model with bitsandbytes.

    Exactly one of ``load_in_8bit`` (LLM.int8(): ``Linear8bitLt`` layers, outliers above
    ``llm_int8_threshold`` computed in 16 bits) and ``load_in_4bit`` (``Linear4bit`` layers of
    ``bnb_4bit_quant_type`` ``"fp4"`` or ``"nf4"``, computing in ``bnb_4bit_compute_dtype``,
    with ``bnb_4bit_use_double_quant`` quantizing the scales too) must be set.

    ``torch_dtype`` is the dtype of the weights that stay unquantized (default: the model's).
    ``skip_modules`` are modules left unquantized (default: the output head and modules with
    tied weights); ``keep_in_fp32_modules`` are left unquantized and kept in float32. A name
    matches a module when it is the module's full name or a dotted part of it (``"c_attn"``
    matches ``transformer.h.0.attn.c_attn``). Invalid values or combinations raise ValueError.
    """

    load_in_8bit: bool = False
    llm_int8_threshold: float = _DEFAULT_THRESHOLD
    load_in_4bit: bool = False
    bnb_4bit_quant_type: str = "fp4"
    bnb_4bit_use_double_quant: bool = False
    bnb_4bit_compute_dtype: str | torch.dtype = "fp32"
    torch_dtype: str | torch.dtype | None = None
    skip_modules: list[str] | None = None
    keep_in_fp32_modules: list[str] | None = None
    target_dtype: torch.dtype | str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        for key in ("load_in_8bit", "load_in_4bit", "bnb_4bit_use_double_quant"):
            if not isinstance(getattr(self, key), bool):
                raise ValueError(
                    f"BnbQuantizationConfig: {key} must be True or False, got {getattr(self, key)!r}"
                )
        if self.load_in_8bit and self.load_in_4bit:
            raise ValueError(
                "BnbQuantizationConfig: load_in_8bit and load_in_4bit cannot both be True; "
                "choose one"
            )
        if not self.load_in_8bit and not self.load_in_4bit:
            raise ValueError(
                "BnbQuantizationConfig: set load_in_8bit=True or load_in_4bit=True (both are False)"
            )
        threshold = self.llm_int8_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or threshold < 0:
            raise ValueError(
                f"BnbQuantizationConfig: llm_int8_threshold must be a number >= 0 "
                f"(0 disables the outlier decomposition), got {threshold!r}"
            )
        self.llm_int8_threshold = float(threshold)
        if self.bnb_4bit_quant_type not in QUANT_TYPES:
            raise ValueError(
                f"BnbQuantizationConfig: bnb_4bit_quant_type={self.bnb_4bit_quant_type!r}; "
                f"use one of {', '.join(QUANT_TYPES)}"
            )
        self.bnb_4bit_compute_dtype = _dtype("bnb_4bit_compute_dtype", self.bnb_4bit_compute_dtype)
        if self.torch_dtype is not None:
            self.torch_dtype = _dtype("torch_dtype", self.torch_dtype)
        self.skip_modules = _names("skip_modules", self.skip_modules)
        self.keep_in_fp32_modules = _names("keep_in_fp32_modules", self.keep_in_fp32_modules)
        if self.load_in_8bit:
            four_bit = [
                key
                for key, value, default in (
                    ("bnb_4bit_quant_type", self.bnb_4bit_quant_type, "fp4"),
                    ("bnb_4bit_use_double_quant", self.bnb_4bit_use_double_quant, False),
                    ("bnb_4bit_compute_dtype", self.bnb_4bit_compute_dtype, torch.float32),
                )
                if value != default
            ]
            if four_bit:
                raise ValueError(
                    f"BnbQuantizationConfig: {', '.join(four_bit)} only apply to 4-bit "
                    "quantization; use load_in_4bit=True or drop them"
                )
            self.target_dtype = torch.int8
        else:
            if self.llm_int8_threshold != _DEFAULT_THRESHOLD:
                raise ValueError(
                    "BnbQuantizationConfig: llm_int8_threshold only applies to 8-bit "
                    "quantization; use load_in_8bit=True or drop it"
                )
            self.target_dtype = "int4"

    @property
    def quantization_bits(self) -> int:
        """8 or 4."""
        return 8 if self.load_in_8bit else 4

    def to_dict(self) -> dict[str, object]:
        """The settings as plain values (dtypes as their names), e.g. for logging."""
        result: dict[str, object] = {}
        for key in (
            "load_in_8bit",
            "llm_int8_threshold",
            "load_in_4bit",
            "bnb_4bit_quant_type",
            "bnb_4bit_use_double_quant",
            "bnb_4bit_compute_dtype",
            "torch_dtype",
            "skip_modules",
            "keep_in_fp32_modules",
        ):
            value = getattr(self, key)
            result[key] = (
                str(value).replace("torch.", "") if isinstance(value, torch.dtype) else value
            )
        return result
