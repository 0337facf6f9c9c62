"""Models and checkpoints shared by the big-model tests."""

from __future__ import annotations

import pytest
import torch
from accel.testing.models import TinyLM, tiny_lm
from accel.utils import save_weights


@pytest.fixture
def model_factory():
    """``tiny_lm(seed=0, **kwargs)``: a TinyLM with deterministic, non-trivial weights."""
    return tiny_lm


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
    model = tiny_lm()
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
