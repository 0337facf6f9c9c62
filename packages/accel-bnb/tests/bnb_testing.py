"""Test helpers of accel-bnb: a small GPT (minGPT module names, token embedding tied to the
output head), a device map with disk offload, and quantize/compare helpers."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

VOCAB, WIDTH, BLOCKS, HEADS, CONTEXT = 256, 128, 4, 4, 32


class CausalSelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_attn = nn.Linear(WIDTH, 3 * WIDTH)
        self.c_proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(WIDTH)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(WIDTH)
        self.mlp = nn.ModuleDict(
            {"c_fc": nn.Linear(WIDTH, 4 * WIDTH), "c_proj": nn.Linear(4 * WIDTH, WIDTH)}
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp["c_proj"](F.gelu(self.mlp["c_fc"](self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(VOCAB, WIDTH),
                "wpe": nn.Embedding(CONTEXT, WIDTH),
                "drop": nn.Dropout(0.0),
                "h": nn.ModuleList(Block() for _ in range(BLOCKS)),
                "ln_f": nn.LayerNorm(WIDTH),
            }
        )
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.lm_head.weight = self.transformer.wte.weight
        for name, param in self.named_parameters():
            if name.endswith("weight") and param.dim() == 2:
                nn.init.normal_(param, std=0.02)
            elif name.endswith("bias"):
                nn.init.normal_(param, std=0.01)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def linear_names(model: nn.Module) -> list[str]:
    """The quantizable Linear layers of the blocks."""
    return [n for n, m in model.named_modules() if isinstance(m, nn.Linear) and n != "lm_head"]


# The seed's map, with the CPU as the device that runs the model (this machine has no GPU):
# blocks 0-1 run on the CPU, blocks 2-3, the final norm and the head are offloaded to disk.
DEVICE_MAP = {
    "transformer.wte": "cpu",
    "transformer.wpe": "cpu",
    "transformer.drop": "cpu",
    "transformer.h.0": "cpu",
    "transformer.h.1": "cpu",
    "transformer.h.2": "disk",
    "transformer.h.3": "disk",
    "transformer.ln_f": "disk",
    "lm_head": "disk",
}


def quantize(checkpoint, config, **kwargs) -> torch.nn.Module:
    """A fresh empty GPT quantized from ``checkpoint``, in eval mode."""
    from accel import init_empty_weights
    from accel.utils import load_and_quantize_model

    with init_empty_weights():
        model = GPT()
    return load_and_quantize_model(
        model, weights_location=checkpoint, bnb_quantization_config=config, **kwargs
    ).eval()


def logits(model, tokens) -> torch.Tensor:
    with torch.no_grad():
        return model(tokens)


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out - ref).norm() / ref.norm()).item()
