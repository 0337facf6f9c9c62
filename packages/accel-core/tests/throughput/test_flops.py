"""FlopCounterMode's count of a GPT-2-shaped and a Llama-shaped model against the analytic count.

The analytic count of one forward and backward over B sequences of S tokens is
``6 * N * B * S`` for the N weights of the matrix multiplications (the tied output layer
included) plus ``12 * L * B * S**2 * d`` for attention's two products per layer (scores and
weighted values, 2 FLOPs a multiply-add, the backward twice the forward). Tiny configs
built locally (no Hub).
"""

from __future__ import annotations

import os

import pytest
import torch
from accel.throughput.flops import measure_flops

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

B, S, VOCAB = 2, 32, 128


def _batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (B, S), generator=g)
    mask = torch.ones(B, S, dtype=torch.long)
    mask[1, 20:] = 0  # padding: the model still computes on every position
    return {"input_ids": ids, "attention_mask": mask, "labels": ids}


def _attention(layers: int, width: int) -> int:
    return 12 * layers * B * S * S * width


def _gpt2(attn: str):
    d, layers = 64, 2
    config = transformers.GPT2Config(
        n_layer=layers, n_embd=d, n_head=4, vocab_size=VOCAB, n_positions=64,
        attn_implementation=attn,
    )  # fmt: skip
    weights = layers * (3 * d * d + d * d + 4 * d * d + 4 * d * d) + d * VOCAB
    return transformers.GPT2LMHeadModel(config), 6 * weights * B * S + _attention(layers, d)


def _llama():
    d, ff, layers, heads, kv_heads = 64, 160, 2, 4, 2
    config = transformers.LlamaConfig(
        hidden_size=d, intermediate_size=ff, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=kv_heads, vocab_size=VOCAB, max_position_embeddings=64,
        attn_implementation="eager",
    )  # fmt: skip
    head = d // heads
    weights = layers * (2 * d * d + 2 * d * kv_heads * head + 3 * d * ff) + d * VOCAB
    return transformers.LlamaForCausalLM(config), 6 * weights * B * S + _attention(layers, d)


@pytest.mark.parametrize("shape", ["gpt2", "llama"])
def test_meta_count_is_within_one_percent_of_the_analytic_count(shape):
    model, analytic = _gpt2("eager") if shape == "gpt2" else _llama()
    flops = measure_flops(model, device="meta", **_batch())
    assert abs(flops - analytic) / analytic < 0.01, (flops, analytic)
    assert all(p.grad is None and p.device.type == "cpu" for p in model.parameters())


def test_a_model_that_reads_its_inputs_is_counted_for_real_with_grad_untouched():
    # transformers' sdpa mask code reads a value (Tensor.item()): not possible on meta
    model, analytic = _gpt2("sdpa")
    with pytest.raises(RuntimeError, match="meta"):
        measure_flops(model, device="meta", **_batch())
    flops = measure_flops(model, **_batch())  # "auto": meta, then real
    assert abs(flops - analytic) / analytic < 0.01, (flops, analytic)
    assert all(p.grad is None for p in model.parameters())


def test_forward_only_and_a_loss_function():
    layer = torch.nn.Linear(8, 4, bias=False)
    x = torch.randn(5, 8)
    assert measure_flops(layer, x, backward=False) == 2 * 5 * 8 * 4
    # backward: the weight's gradient only (x needs none), another 2 * 5 * 8 * 4
    assert measure_flops(layer, x, loss_fn=lambda out: out.square().sum()) == 2 * 2 * 5 * 8 * 4
    with pytest.raises(ValueError, match="'meta', 'real' or 'auto'"):
        measure_flops(layer, x, device="gpu")
