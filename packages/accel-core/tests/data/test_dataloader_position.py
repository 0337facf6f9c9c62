"""A prepared data loader's position (epoch, batches yielded): state_dict, resume, skip_first_batches.

These run in one process; test_resume.py checks the same through save_state /
load_state in fresh processes.
"""

from __future__ import annotations

import pytest
import torch
from accel import Accelerator, DataLoaderConfiguration, skip_first_batches
from accel.state import AcceleratorState, GradientState
from accel.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 3
BATCHES_PER_EPOCH = 10


@pytest.fixture(params=["default", "seedable"])
def mode(request):
    """The default sampler (Accelerate's: drawn from the global generator) or the seedable one."""
    return request.param


def _fresh_loader(mode: str = "default", seed: int = 7):
    """A shuffled loader of 40 samples in batches of 4, prepared by a fresh Accelerator after set_seed."""
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    set_seed(seed)
    config = DataLoaderConfiguration(use_seedable_sampler=mode == "seedable")
    accelerator = Accelerator(cpu=True, dataloader_config=config)
    dataset = TensorDataset(torch.arange(40))
    return accelerator.prepare(DataLoader(dataset, batch_size=4, shuffle=True))


def _train(loader, start_epoch: int = 0, stop_after: int | None = None) -> list[list[int]]:
    seen: list[list[int]] = []
    for _epoch in range(start_epoch, EPOCHS):
        for (batch,) in loader:
            seen.append(batch.tolist())
            torch.rand(3)  # what a training step takes from the global generator (dropout)
            if stop_after is not None and len(seen) == stop_after:
                return seen
    return seen


def _resumed(state, rng, mode: str):
    """A new run (other seed) given the saved position and global RNG state, as load_state does."""
    resumed = _fresh_loader(mode, seed=123)
    resumed.load_state_dict(state)
    torch.set_rng_state(rng)
    return resumed


@pytest.fixture
def uninterrupted(mode) -> list[list[int]]:
    seen = _train(_fresh_loader(mode))
    assert len(seen) == EPOCHS * BATCHES_PER_EPOCH
    epochs = [sorted(sum(seen[i : i + 10], [])) for i in range(0, 30, 10)]
    assert all(e == list(range(40)) for e in epochs)  # every sample once per epoch
    assert seen[:10] != seen[10:20]  # each epoch has its own order
    return seen


@pytest.mark.parametrize("k", [3, 13, 29])
def test_state_dict_restores_a_mid_epoch_position(uninterrupted, mode, k):
    loader = _fresh_loader(mode)
    first = _train(loader, stop_after=k)
    state, rng = loader.state_dict(), torch.get_rng_state()
    assert state["epoch"] == k // 10 and state["batches_yielded"] == k % 10
    assert ("sampler" in state) == (mode == "default")  # what the epoch's order came from

    resumed = _resumed(state, rng, mode)
    assert resumed.epoch == k // 10
    assert first + _train(resumed, start_epoch=resumed.epoch) == uninterrupted


def test_resume_draws_nothing_the_interrupted_run_drew(mode):
    """After a mid-epoch resume the global generator goes on exactly as in the uninterrupted run."""
    _train(_fresh_loader(mode))
    expected = torch.get_rng_state()
    loader = _fresh_loader(mode)
    _train(loader, stop_after=13)
    resumed = _resumed(loader.state_dict(), torch.get_rng_state(), mode)
    _train(resumed, start_epoch=resumed.epoch)
    assert torch.equal(torch.get_rng_state(), expected)


def test_state_dict_between_epochs(uninterrupted, mode):
    loader = _fresh_loader(mode)
    first = [batch.tolist() for (batch,) in loader]  # one whole epoch
    for _ in first:
        torch.rand(3)
    state = loader.state_dict()
    assert state["epoch"] == 1 and state["batches_yielded"] == 0
    resumed = _resumed(state, torch.get_rng_state(), mode)
    assert first + _train(resumed, start_epoch=resumed.epoch) == uninterrupted


def test_state_dict_after_the_last_batch_resumes_with_loader_epoch(uninterrupted, mode):
    loader = _fresh_loader(mode)
    first = _train(loader, stop_after=10)  # saved inside the loop, after the epoch's last batch
    resumed = _resumed(loader.state_dict(), torch.get_rng_state(), mode)
    assert first + _train(resumed, start_epoch=resumed.epoch) == uninterrupted


def test_accelerate_recipe_after_the_last_batch_of_an_epoch(uninterrupted, mode):
    loader = _fresh_loader(mode)
    first = _train(loader, stop_after=10)
    resumed = _resumed(loader.state_dict(), torch.get_rng_state(), mode)
    start_epoch, skip = divmod(10, len(resumed))
    assert skip == 0
    assert first + _train(resumed, start_epoch=start_epoch) == uninterrupted


def test_skip_first_batches_replaces_the_restored_position(uninterrupted, mode):
    loader = _fresh_loader(mode)
    _train(loader, stop_after=13)
    resumed = _resumed(loader.state_dict(), torch.get_rng_state(), mode)  # epoch 1, 3 batches
    same = skip_first_batches(resumed, 5)
    assert same is resumed  # a prepared loader is skipped in place, at the sampler
    rest = [batch.tolist() for (batch,) in resumed]
    assert rest == uninterrupted[15:20]  # epoch 1 from batch 5, not 3 + 5
    # the skip applies to one iteration only (the order of epoch 2 is the seedable one's
    # whatever came before; the default one draws it from the global generator)
    following = [b.tolist() for (b,) in resumed]
    assert len(following) == 10
    if mode == "seedable":
        assert following == uninterrupted[20:30]


def test_skip_first_batches_then_set_epoch_still_skips(mode):
    """transformers' Trainer resuming inside epoch 1: skip_first_batches, then set_epoch(1)."""
    loader = _fresh_loader(mode)
    loader.set_epoch(1)
    epoch1 = [b.tolist() for (b,) in loader]
    skipped = skip_first_batches(_fresh_loader(mode), 4)  # the same draws: set_seed, prepare
    skipped.set_epoch(1)
    assert [b.tolist() for (b,) in skipped] == epoch1[4:]
    skipped.set_epoch(2)
    assert len([b for b in skipped]) == 10  # the next iteration is whole


def test_skip_first_batches_on_a_plain_dataloader():
    loader = DataLoader(TensorDataset(torch.arange(10)), batch_size=2)
    skipped = skip_first_batches(loader, 3)
    assert len(skipped) == 2
    assert [b.tolist() for (b,) in skipped] == [[6, 7], [8, 9]]


def test_set_epoch_resets_the_position(uninterrupted):
    loader = _fresh_loader("seedable")
    _train(loader, stop_after=3)
    loader.set_epoch(2)
    assert [b.tolist() for (b,) in loader] == _train(_fresh_loader("seedable"))[20:30]


def test_set_seed_and_data_seed_fix_the_order_across_accelerators(mode):
    first = _train(_fresh_loader(mode, seed=11))
    second = _train(_fresh_loader(mode, seed=11))
    other = _train(_fresh_loader(mode, seed=12))
    assert first == second
    assert first != other


@pytest.mark.parametrize("batches", [0, 1, 3])
def test_every_batch_once_and_the_last_one_flagged(batches):
    """An empty epoch yields nothing; otherwise only the last batch sees end_of_dataloader."""
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    accelerator = Accelerator(cpu=True)
    loader = accelerator.prepare(DataLoader(TensorDataset(torch.arange(2 * batches)), batch_size=2))
    seen, flags = [], []
    for (batch,) in loader:
        seen.extend(batch.tolist())
        flags.append(loader.end_of_dataloader)
    assert seen == list(range(2 * batches))
    assert flags == [False] * (batches - 1) + [True] * (batches > 0)
    assert loader.end_of_dataloader is True and loader.batches_yielded == 0
