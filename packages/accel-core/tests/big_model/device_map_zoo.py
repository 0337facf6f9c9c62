"""Models, budgets and options of the device-map parity cases (accel vs Accelerate).

Shared by ``tools/gen_device_map_reference.py`` (which runs Accelerate on them once and
commits the maps to ``accelerate_device_maps.json``) and ``test_device_map_parity.py``
(which runs accel on them). Plain torch modules, seeded, so both sides see the same
shapes, dtypes, ties and buffers, plus one real transformers model (a tiny tied GPT-2, built
from a config: transformers is needed on both sides, at the same version).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import torch
from accel.testing.models import Block, TinyLM
from torch import nn


class Mlp(nn.Module):
    """Linear layers of growing then shrinking width, no ties, no buffers."""

    def __init__(self):
        super().__init__()
        widths = [16, 64, 128, 64, 32, 8]
        layers: list[nn.Module] = []
        for a, b in itertools.pairwise(widths):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.net = nn.Sequential(*layers)


class ConvNet(nn.Module):
    """Convolutions with batch norms (running statistics are buffers, one is an int64)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16), nn.ReLU())
        self.stage1 = nn.Sequential(nn.Conv2d(16, 32, 3), nn.BatchNorm2d(32))
        self.stage2 = nn.Sequential(nn.Conv2d(32, 32, 3), nn.BatchNorm2d(32))
        self.classifier = nn.Linear(32, 10)


class Embeddings(nn.Module):
    """A module with children *and* its own parameter and buffers (like BERT's embeddings)."""

    def __init__(self, vocab: int, width: int):
        super().__init__()
        self.word = nn.Embedding(vocab, width)
        self.position = nn.Embedding(16, width)
        self.gain = nn.Parameter(torch.ones(width))
        self.register_buffer("position_ids", torch.arange(16), persistent=False)
        self.register_buffer("mask", torch.ones(16, 16, dtype=torch.bool))


class EncoderDecoder(nn.Module):
    """Nested modules, a decoder output tied deep inside the encoder, tensors on the root."""

    def __init__(self, width: int = 24, vocab: int = 50):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(width))
        self.encoder = nn.Module()
        self.encoder.embeddings = Embeddings(vocab, width)
        self.encoder.layers = nn.ModuleList(Block(width) for _ in range(3))
        self.decoder = nn.Module()
        self.decoder.layers = nn.ModuleList(Block(width) for _ in range(2))
        self.decoder.out = nn.Linear(width, vocab, bias=False)
        self.decoder.out.weight = self.encoder.embeddings.word.weight
        self.register_buffer("temperature", torch.tensor(1.0))


class HalfModel(nn.Module):
    """fp16 weights, an fp32 norm, an int buffer and a bool buffer (sizes per dtype)."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(32, 64).half()
        self.blocks = nn.ModuleList(Block(64).half() for _ in range(3))
        self.norm = nn.LayerNorm(64)
        self.register_buffer("steps", torch.zeros(8, dtype=torch.int32))
        self.register_buffer("keep", torch.ones(64, dtype=torch.bool))
        self.out = nn.Linear(64, 16).half()


class TwoTies(nn.Module):
    """Two groups of tied weights, one of them three names."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.a = nn.Linear(width, width)
        self.middle = nn.Sequential(Block(width), Block(width))
        self.b = nn.Linear(width, width)
        self.c = nn.Linear(width, width)
        self.b.weight = self.a.weight
        self.c.weight = self.a.weight
        self.d = nn.Linear(width, 2 * width)
        self.e = nn.Linear(width, 2 * width)
        self.e.weight = self.d.weight


def tiny_gpt2() -> nn.Module:
    """transformers' GPT2LMHeadModel, tiny, its head tied to the word embeddings."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=64,
        n_positions=32,
        n_embd=32,
        n_layer=3,
        n_head=2,
        bos_token_id=1,
        eos_token_id=1,
    )
    return GPT2LMHeadModel(config)


MODELS: dict[str, Callable[[], nn.Module]] = {
    "tiny_lm": TinyLM,
    "tiny_lm_deep": lambda: TinyLM(width=16, depth=10, vocab=24),
    "mlp": Mlp,
    "convnet": ConvNet,
    "encoder_decoder": EncoderDecoder,
    "half": HalfModel,
    "two_ties": TwoTies,
    "gpt2": tiny_gpt2,
}


def build(name: str) -> nn.Module:
    """The model ``name``, with the same weights every time."""
    torch.manual_seed(0)
    return MODELS[name]()


def _total(model: nn.Module) -> int:
    tensors = {id(t): t for t in [*model.parameters(), *model.buffers()]}
    return sum(t.numel() * t.element_size() for t in tensors.values())


def budgets(model: nn.Module) -> list[dict[Any, int]]:
    """Memory budgets (bytes) scaled to the model: everything fits, split over accelerators,
    offload to the CPU, to the disk, an accelerator too small for any layer, ``mps``."""
    total = _total(model)
    t = lambda fraction: int(total * fraction)  # noqa: E731
    return [
        {"cpu": t(2.0)},
        {"cpu": t(0.45)},
        {0: t(2.0), "cpu": t(2.0)},
        {0: t(0.55), "cpu": t(2.0)},
        {0: t(0.35), 1: t(0.35), "cpu": t(2.0)},
        {0: t(0.3), 1: t(0.3), "cpu": t(0.3)},
        {0: t(0.25), "cpu": t(0.25), "disk": t(10.0)},
        {0: t(0.6), 1: t(0.6), 2: t(0.6), "cpu": t(1.0)},
        {0: t(0.03), "cpu": t(2.0)},
        {0: t(0.03), 1: t(0.5), "cpu": t(0.3)},
        {"mps": t(0.6), "cpu": t(2.0)},
        # fits whole, but not next to the reserve for the largest layer
        {0: t(1.05), "cpu": t(2.0)},
        {"cpu": t(1.05)},
        {"mps": t(1.05), "cpu": t(2.0)},
        {0: t(0.5), 1: t(0.6), "cpu": t(0.2)},
        {0: t(0.15), 1: t(0.15), 2: t(0.15), "cpu": t(0.15)},
        {0: t(0.45), 1: t(0.3), "cpu": t(0.2), "disk": t(1.0)},
        {"cpu": t(0.6), "disk": t(10.0)},
    ]


OPTIONS: list[dict[str, Any]] = [
    {},
    {"no_split_module_classes": ["Block"]},
    {"offload_buffers": True},
    {"fallback_allocation": True},
    {"no_split_module_classes": ["Block", "Embeddings"], "fallback_allocation": True},
    {"dtype": "float16"},
    {"clean_result": False},
    {"no_split_module_classes": ["Block"], "clean_result": False},
]
"""Keyword arguments of ``infer_auto_device_map`` tried with every model and budget."""

MODEL_OPTIONS: dict[str, list[dict[str, Any]]] = {
    "gpt2": [{"no_split_module_classes": ["GPT2Block"]}],  # what from_pretrained passes
}
"""More options for one model (its own unsplittable classes)."""

BALANCED_OPTIONS: list[dict[str, Any]] = [
    {},
    {"low_zero": True},
    {"no_split_module_classes": ["Block"]},
    {"no_split_module_classes": ["Block"], "low_zero": True},
    {"dtype": "float16"},
]
"""Keyword arguments of ``get_balanced_memory`` tried with every model and multi-accelerator budget."""


def cases() -> Iterator[tuple[str, int, dict[Any, int], dict[str, Any]]]:
    """Every (model name, budget index, budget, options) of the parity test."""
    for name in MODELS:
        for index, budget in enumerate(budgets(build(name))):
            for options in OPTIONS + MODEL_OPTIONS.get(name, []):
                yield name, index, budget, options


def balanced_cases() -> Iterator[tuple[str, int, dict[Any, int], dict[str, Any]]]:
    """Every (model name, budget index, budget, options) of the ``get_balanced_memory`` parity."""
    for name in MODELS:
        for index, budget in enumerate(budgets(build(name))):
            if sum(isinstance(k, int) for k in budget) < 2:
                continue
            for options in BALANCED_OPTIONS:
                yield name, index, budget, options


def encode_budget(budget: dict[Any, int]) -> list[list[Any]]:
    """A budget as JSON-able ``[device, bytes]`` pairs (keys stay ints or strings)."""
    return [[k, v] for k, v in budget.items()]


def decode_budget(pairs: list[list[Any]]) -> dict[Any, int]:
    """The inverse of :func:`encode_budget`."""
    return {k: v for k, v in pairs}
