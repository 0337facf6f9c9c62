"""use_stateful_dataloader=True: a prepared loader's state_dict() is torchdata's, as in Accelerate.

Accelerate's prepared loaders return the state of the ``StatefulDataLoader`` they wrap, so a
state saved from a prepared loader loads into a plain ``StatefulDataLoader`` and the other way
round. Here a prepared loader and a plain ``StatefulDataLoader`` over the same dataset and
batch sampler (torch's, which is what a prepared loader on one process iterates) read the
same batches from the same seed; their states must be equal and load into each other.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from accel import Accelerator, DataLoaderConfiguration
from accel.state import AcceleratorState
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

stateful_dataloader = pytest.importorskip("torchdata.stateful_dataloader")
StatefulDataLoader = stateful_dataloader.StatefulDataLoader

DATA = list(range(20))
BATCH = 3
TAKEN = 4


@pytest.fixture
def accelerator():
    AcceleratorState._reset_state()
    config = DataLoaderConfiguration(use_stateful_dataloader=True)
    yield Accelerator(cpu=True, dataloader_config=config)
    AcceleratorState._reset_state()


def _prepared(accelerator, shuffle: bool, workers: int):
    return accelerator.prepare(
        DataLoader(DATA, batch_size=BATCH, shuffle=shuffle, num_workers=workers)
    )


def _plain(shuffle: bool, workers: int) -> StatefulDataLoader:
    sampler = RandomSampler(DATA) if shuffle else SequentialSampler(DATA)
    batches = BatchSampler(sampler, BATCH, drop_last=False)
    return StatefulDataLoader(DATA, batch_sampler=batches, num_workers=workers)


def _read(loader, count: int | None = None) -> list[list[int]]:
    """``count`` batches (all if None) of a new iteration, from seed 1 (the order's draw)."""
    torch.manual_seed(1)
    return [b.tolist() for b in itertools.islice(loader, count)]


def _take(loader) -> tuple[list[list[int]], dict]:
    """The first TAKEN batches and the state after them (the iterator kept alive)."""
    torch.manual_seed(1)
    iterator = iter(loader)
    batches = [next(iterator).tolist() for _ in range(TAKEN)]
    return batches, loader.state_dict()


def _same(a, b) -> bool:
    """Equal structure and values (tensors compared by value)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("shuffle", [False, True], ids=["sequential", "shuffled"])
def test_state_dict_is_the_stateful_dataloaders_and_loads_both_ways(accelerator, shuffle, workers):
    straight = _read(_plain(shuffle, workers))
    assert _read(_prepared(accelerator, shuffle, workers)) == straight  # the same batches

    ours, our_state = _take(_prepared(accelerator, shuffle, workers))
    theirs, their_state = _take(_plain(shuffle, workers))
    assert ours == theirs == straight[:TAKEN]
    assert "epoch" not in our_state and "stateful_dataloader" not in our_state, our_state
    assert _same(our_state, their_state), (our_state, their_state)

    # a prepared loader's state resumes a plain StatefulDataLoader at the next batch ...
    plain = _plain(shuffle, workers)
    plain.load_state_dict(our_state)
    assert _read(plain) == straight[TAKEN:]
    # ... and a plain StatefulDataLoader's state a prepared loader
    prepared = _prepared(accelerator, shuffle, workers)
    prepared.load_state_dict(their_state)
    assert _read(prepared) == straight[TAKEN:]
    assert _read(prepared) == straight  # the next epoch is whole


def test_a_loaded_torchdata_state_takes_its_epoch_from_set_epoch(accelerator):
    _, state = _take(_prepared(accelerator, shuffle=False, workers=0))
    loader = _prepared(accelerator, shuffle=False, workers=0)
    loader.load_state_dict(state)
    loader.set_epoch(3)  # what the training loop (or the Trainer) does when it resumes epoch 3
    assert loader.epoch == 3 and loader.batches_yielded == TAKEN
    assert [b.tolist() for b in loader] == [DATA[i : i + BATCH] for i in range(12, 20, BATCH)]
    assert loader.epoch == 4


def test_the_epochs_last_batch_saves_a_finished_state(accelerator):
    loader = _prepared(accelerator, shuffle=False, workers=0)
    assert loader.state_dict() == {}  # nothing read yet: loading it changes nothing
    batches = [b.tolist() for b in loader]
    state = loader.state_dict()
    assert state["_iterator_finished"] is True and state["_num_yielded"] == len(batches)
    plain = _plain(shuffle=False, workers=0)
    plain.load_state_dict(state)
    assert [b.tolist() for b in plain] == batches  # a new epoch


def test_save_state_keeps_accels_position_so_a_shuffled_epoch_resumes_exactly(tmp_path):
    """save_state writes position_state_dict(): the epoch's drawn order travels with it."""
    from accel.utils import set_seed

    def run():
        AcceleratorState._reset_state()
        config = DataLoaderConfiguration(use_stateful_dataloader=True)
        accelerator = Accelerator(cpu=True, dataloader_config=config)
        set_seed(5)
        return accelerator, accelerator.prepare(DataLoader(DATA, batch_size=BATCH, shuffle=True))

    _, loader = run()
    straight = [b.tolist() for b in loader] + [b.tolist() for b in loader]  # two epochs
    accelerator, loader = run()
    first = [b.tolist() for b in itertools.islice(loader, TAKEN)]
    accelerator.save_state(tmp_path / "checkpoint")
    accelerator, loader = run()
    accelerator.load_state(tmp_path / "checkpoint")
    position = loader.position_state_dict()
    assert position["epoch"] == 0 and position["batches_yielded"] == TAKEN
    assert _same(position["stateful_dataloader"], loader.state_dict())
    rest = [b.tolist() for b in loader] + [b.tolist() for b in loader]
    assert first + rest == straight
    AcceleratorState._reset_state()


def test_loaders_say_whether_they_are_stateful():
    """``use_stateful_dataloader`` reads back as Accelerate's loaders' attribute does."""
    from accel.data_loader import DataLoaderDispatcher, DataLoaderShard

    for kind in (DataLoaderShard, DataLoaderDispatcher):
        assert kind(
            list(range(8)), batch_size=4, use_stateful_dataloader=True
        ).use_stateful_dataloader
        assert kind(list(range(8)), batch_size=4).use_stateful_dataloader is False
