"""Shared fixtures: a small tied-embedding GPT, its fp32 outputs, and its sharded checkpoint."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from bnb_testing import GPT, VOCAB  # noqa: E402


@pytest.fixture(autouse=True)
def _quiet_bitsandbytes():
    # bitsandbytes logs one line per 8-bit matmul of a float32 input (cast to float16)
    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)


@pytest.fixture(scope="session")
def reference() -> GPT:
    torch.manual_seed(0)
    return GPT().eval()


@pytest.fixture(scope="session")
def tokens() -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, 32), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="session")
def reference_logits(reference, tokens) -> torch.Tensor:
    with torch.no_grad():
        return reference(tokens)


@pytest.fixture(scope="session")
def checkpoint(reference, tmp_path_factory) -> Path:
    """The reference weights as a sharded safetensors checkpoint (index + 4 shards)."""
    from accel.utils.modeling import save_weights

    folder = tmp_path_factory.mktemp("fp32")
    save_weights(reference.state_dict(), folder, max_shard_size="1MB")
    assert (folder / "model.safetensors.index.json").exists()
    return folder


@pytest.fixture
def empty_model() -> GPT:
    from accel import init_empty_weights

    with init_empty_weights():
        return GPT()
