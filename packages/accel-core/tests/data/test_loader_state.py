"""DataLoaderStateMixin and base_dataloader: Accelerate's loader names, and a custom loader the gradient state follows."""

from __future__ import annotations

import pytest
import torch
from accel.data_loader import (
    DataLoaderDispatcher,
    DataLoaderShard,
    DataLoaderStateMixin,
    SkipDataLoader,
)
from accel.state import GradientState
from accel.testing.fixtures import reset_accel_state
from torch.utils.data import DataLoader


@pytest.fixture(autouse=True)
def _fresh_state():
    reset_accel_state()
    yield
    reset_accel_state()


def _loaders(stateful: bool) -> list[DataLoader]:
    kwargs = {"batch_size": 4, "use_stateful_dataloader": stateful}
    return [
        SkipDataLoader(range(16), skip_batches=2, **kwargs),
        DataLoaderShard(range(16), **kwargs),
        DataLoaderDispatcher(range(16), **kwargs),
    ]


@pytest.mark.parametrize("stateful", [False, True], ids=["plain", "stateful"])
def test_every_loader_is_a_state_mixin_and_its_own_base_dataloader(stateful):
    if stateful:
        pytest.importorskip("torchdata.stateful_dataloader")
    for loader in _loaders(stateful):
        assert isinstance(loader, DataLoaderStateMixin)
        assert loader.base_dataloader is loader
        assert (loader.end_of_dataloader, loader.remainder) == (False, -1)
    for cls in (SkipDataLoader, DataLoaderShard, DataLoaderDispatcher):
        with pytest.raises(AttributeError, match="instance"):
            _ = cls.base_dataloader


def test_the_gradient_state_follows_each_loader_while_it_iterates():
    state = GradientState()
    outer = DataLoaderShard(range(8), batch_size=4)
    skip = SkipDataLoader(range(8), batch_size=2, skip_batches=1)
    seen = []
    for batch in outer:
        assert state.active_dataloader is outer
        for _ in skip:
            assert state.active_dataloader is skip and not state.end_of_dataloader
        assert state.active_dataloader is outer  # given back when the inner loop ends
        seen.append((batch.tolist(), state.end_of_dataloader))
    assert seen == [([0, 1, 2, 3], False), ([4, 5, 6, 7], True)]
    assert not state.in_dataloader


class CountingLoader(DataLoaderStateMixin):
    """A loader of the user's own, not a DataLoader: marks its last batch and its remainder."""

    def __init__(self, batches: list[torch.Tensor], real_in_last: int):
        self.batches = batches
        self.real_in_last = real_in_last
        self.gradient_state = GradientState()

    def __iter__(self):
        self.begin()
        try:
            for index, batch in enumerate(self.batches):
                if index == len(self.batches) - 1:
                    self.end_of_dataloader = True
                    self.remainder = self.real_in_last
                yield batch
        finally:
            self.end()


def test_a_custom_loader_drives_accumulation_and_gather_for_metrics():
    from accel import Accelerator

    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=4)
    model = torch.nn.Linear(2, 1)
    loader = CountingLoader([torch.arange(4.0), torch.arange(4.0, 8.0), torch.arange(8.0, 12.0)], 2)
    synced, gathered = [], []
    for batch in loader:
        with accelerator.accumulate(model):
            synced.append(accelerator.sync_gradients)
            gathered.append(accelerator.gather_for_metrics(batch).tolist())
    # 3 batches with 4 accumulation steps: only the loader's last batch syncs
    assert synced == [False, False, True]
    # its last batch holds 2 real samples: the 2 padding rows are dropped
    assert gathered == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0]]
    assert not accelerator.gradient_state.in_dataloader


def test_the_compat_path_is_accels_class():
    accelerate_data_loader = pytest.importorskip("accelerate.data_loader")
    assert accelerate_data_loader.DataLoaderStateMixin is DataLoaderStateMixin
