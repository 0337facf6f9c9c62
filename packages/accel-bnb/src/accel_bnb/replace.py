"""Which ``nn.Linear`` layers to quantize, and swapping them for bitsandbytes layers."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from accel.big_model.modeling import find_tied_parameters

from .config import BnbQuantizationConfig


def matches(name: str, keys: Iterable[str]) -> bool:
    """Whether module ``name`` is, or lies inside, a module named by one of ``keys``.

    A key matches when it is a whole dotted part of the name: ``"lm_head"`` matches
    ``lm_head``; ``"h.0"`` matches ``transformer.h.0.mlp.c_fc``; ``"c_attn"`` matches every
    ``...attn.c_attn`` (but ``"attn"`` does not match ``c_attn``).
    """
    dotted = f".{name}."
    return any(f".{key}." in dotted for key in keys if key)


def default_skip_modules(model: torch.nn.Module) -> list[str]:
    """Modules left unquantized by default: those holding tied weights, and the output head
    (the module owning the model's last parameter)."""
    skip: list[str] = []
    for group in find_tied_parameters(model):
        for name in group:
            skip.append(name.rpartition(".")[0])
    params = list(model.named_parameters(remove_duplicate=False))
    if params:
        skip.append(params[-1][0].rpartition(".")[0])
    return [name for name in dict.fromkeys(skip) if name]


def linear_layers(model: torch.nn.Module) -> dict[str, torch.nn.Linear]:
    """Every plain ``nn.Linear`` of ``model`` by name (subclasses such as bnb layers excluded)."""
    return {
        name: module for name, module in model.named_modules() if type(module) is torch.nn.Linear
    }


def layers_to_quantize(model: torch.nn.Module, skip: Iterable[str]) -> list[str]:
    """Names of the ``nn.Linear`` layers of ``model`` that ``skip`` does not exclude."""
    skip = list(skip)
    return [name for name in linear_layers(model) if not matches(name, skip)]


def replace_with_bnb_layers(
    model: torch.nn.Module, config: BnbQuantizationConfig, names: Iterable[str]
) -> torch.nn.Module:
    """Replace the ``nn.Linear`` layers ``names`` of ``model`` by empty (meta) bitsandbytes layers.

    ``Linear8bitLt`` for 8-bit, ``Linear4bit`` for 4-bit. Their weights are filled in (and
    quantized) when the checkpoint is loaded.
    """
    import bitsandbytes as bnb

    for name in names:
        old = model.get_submodule(name)
        if not isinstance(old, torch.nn.Linear):
            raise TypeError(f"{name} is a {type(old).__name__}, not an nn.Linear")
        if config.load_in_8bit:
            new: torch.nn.Module = bnb.nn.Linear8bitLt(
                old.in_features,
                old.out_features,
                bias=old.bias is not None,
                has_fp16_weights=False,
                threshold=config.llm_int8_threshold,
                device="meta",
            )
        else:
            new = bnb.nn.Linear4bit(
                old.in_features,
                old.out_features,
                bias=old.bias is not None,
                compute_dtype=config.bnb_4bit_compute_dtype,
                compress_statistics=config.bnb_4bit_use_double_quant,
                quant_type=config.bnb_4bit_quant_type,
                device="meta",
            )
        new.requires_grad_(False)
        if old.bias is not None:
            new.bias.requires_grad_(old.bias.requires_grad)
        new.train(old.training)
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, attr, new)
    return model
