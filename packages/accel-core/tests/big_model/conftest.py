"""Models and checkpoints shared by the big-model tests."""

from __future__ import annotations

import pytest
import torch
from accel.utils import save_weights
from torch import nn


class Block(nn.Module):
    """A residual block: splitting it across devices would break nothing, but it is a unit."""

    def __init__(self, width: int):
        super().__init__()
        self.fc1 = nn.Linear(width, width)
        self.fc2 = nn.Linear(width, width)
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.relu(self.fc1(x))) * self.scale


class TinyLM(nn.Module):
    """Embedding, blocks, norm and a head tied to the embedding (like GPT-2)."""

    def __init__(self, width: int = 32, depth: int = 4, vocab: int = 40):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def make_model(seed: int = 0, **kwargs) -> TinyLM:
    torch.manual_seed(seed)
    model = TinyLM(**kwargs)
    with torch.no_grad():
        for p in model.parameters():  # non-trivial norm weights, so a wrong load shows
            p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


@pytest.fixture
def model_factory():
    """``make_model(seed=0, **kwargs)``: a TinyLM with deterministic, non-trivial weights."""
    return make_model


@pytest.fixture
def empty_model():
    """``empty_model(**kwargs)``: a TinyLM built under ``init_empty_weights``."""
    from accel import init_empty_weights

    def build(**kwargs) -> TinyLM:
        with init_empty_weights():
            return TinyLM(**kwargs).eval()

    return build


@pytest.fixture
def reference():
    """A loaded model, example inputs and its outputs."""
    model = make_model()
    ids = torch.randint(0, 40, (3, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(ids)
    return model, ids, expected


@pytest.fixture
def sharded_checkpoint(tmp_path, reference):
    """The reference model saved as sharded safetensors with an index JSON (tied weight once)."""
    model = reference[0]
    folder = tmp_path / "ckpt"
    names = save_weights(model.state_dict(), folder, max_shard_size="10KB")
    assert "model.safetensors.index.json" in names and len(names) > 3
    return folder
