"""Variable-length token batches and their token-weighted loss, for micro-batching tests.

The backends' 2-process workers (accel-ddp, accel-fsdp) draw the same batches from these, so
their results compare with each other and with one process.
"""

from __future__ import annotations

import torch

VOCAB, WIDTH, LENGTH, GLOBAL = 11, 8, 6, 8
"""Vocabulary, embedding width, sequence length and global batch of the test batches."""


def token_batch(step: int) -> dict[str, torch.Tensor]:
    """The global batch of ``step``: ``input_ids`` and ``labels`` padded with -100 past each length."""
    g = torch.Generator().manual_seed(100 + step)
    ids = torch.randint(0, VOCAB, (GLOBAL, LENGTH), generator=g)
    lengths = torch.randint(1, LENGTH + 1, (GLOBAL,), generator=g)
    labels = torch.randint(0, VOCAB, (GLOBAL, LENGTH), generator=g)
    labels[torch.arange(LENGTH)[None, :] >= lengths[:, None]] = -100
    return {"input_ids": ids, "labels": labels}


def token_loss(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    """Mean cross-entropy over the batch's real (non-padding) tokens."""
    logits = model(batch["input_ids"])
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, VOCAB), batch["labels"].reshape(-1), ignore_index=-100
    )
