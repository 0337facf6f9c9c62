"""An iterable dataset loaded without a batch size (``batch_size=None``) on several processes."""

from __future__ import annotations

import torch
from accel.data_loader import prepare_data_loader
from torch.utils.data import DataLoader, IterableDataset


class _Stream(IterableDataset):
    def __iter__(self):
        yield from (torch.tensor([i]) for i in range(6))


def test_each_item_of_an_unbatched_stream_goes_to_one_process() -> None:
    # each item is already a batch: the processes take turns (it raised a TypeError before)
    seen = [
        [batch.tolist() for batch in prepare_data_loader(
            DataLoader(_Stream(), batch_size=None),
            num_processes=2,
            process_index=rank,
            put_on_device=False,
        )]
        for rank in (0, 1)
    ]  # fmt: skip
    assert seen == [[[0], [2], [4]], [[1], [3], [5]]]


def test_a_dispatched_batch_without_tensors_is_a_clear_error() -> None:
    import pytest

    loader = prepare_data_loader(
        DataLoader(["a", "b", "c", "d"], batch_size=2), dispatch_batches=True, put_on_device=False
    )
    with pytest.raises(TypeError, match="dispatch_batches needs batches holding tensors"):
        list(loader)
