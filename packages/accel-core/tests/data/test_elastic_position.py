"""A loader position saved on N processes continues the same global order on M (in one process).

Each "process" is a loader prepared with ``num_processes`` / ``process_index``, stepped in
lockstep as real ranks are; the checks are those of a resize: every sample of the epoch seen
exactly once across it (padding aside), and the global batches after it those an
uninterrupted run on the new size would have had.
"""

from __future__ import annotations

import itertools
import time

import pytest
import torch
from accel.data.loader import prepare_data_loader
from accel.elastic.position import VERSION, upgrade
from accel.errors import ResumeError
from torch.utils.data import BatchSampler, DataLoader, IterableDataset, SequentialSampler


class Stream(IterableDataset):
    def __init__(self, n: int):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


def _prepare(n: int, make, **kwargs):
    loaders = []
    for rank in range(n):
        torch.manual_seed(1234)  # what the ranks agree on through the broadcast
        loaders.append(prepare_data_loader(make(), num_processes=n, process_index=rank, **kwargs))
    return loaders


def _run(loaders, steps=None, states=None):
    """Step the loaders in lockstep; returns the global batches (ranks' batches in rank order)."""
    if states is not None:
        for loader, state in zip(loaders, states):
            loader.load_state_dict(state)
    iterators = [iter(loader) for loader in loaders]
    rounds = []
    for _ in itertools.count() if steps is None else range(steps):
        batches = [next(it, None) for it in iterators]
        if all(b is None for b in batches):
            break
        rounds.append([[] if b is None else b.tolist() for b in batches])
    return rounds, [loader.state_dict() for loader in loaders]


def _flat(rounds):
    return [i for r in rounds for b in r for i in b]


LAYOUTS = {
    "sequential": dict(make=lambda: DataLoader(list(range(96)), batch_size=4)),
    "shuffled": dict(make=lambda: DataLoader(list(range(96)), batch_size=4, shuffle=True)),
    "seedable": dict(
        make=lambda: DataLoader(list(range(96)), batch_size=4, shuffle=True),
        use_seedable_sampler=True,
        data_seed=7,
    ),
    "drop_last": dict(
        make=lambda: DataLoader(list(range(90)), batch_size=4, shuffle=True, drop_last=True)
    ),
    "uneven": dict(make=lambda: DataLoader(list(range(90)), batch_size=4, shuffle=True)),
    "not_even_batches": dict(
        make=lambda: DataLoader(list(range(90)), batch_size=4), even_batches=False
    ),
    "split_batches": dict(
        make=lambda: DataLoader(list(range(96)), batch_size=8, shuffle=True), split_batches=True
    ),
}


@pytest.mark.parametrize("saved_on, resumed_on", [(2, 1), (1, 2), (2, 4), (4, 2), (3, 2)])
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_resize_sees_every_sample_exactly_once(name, saved_on, resumed_on):
    options = dict(LAYOUTS[name])
    if options.get("split_batches") and (8 % saved_on or 8 % resumed_on):
        pytest.skip("split_batches needs a batch size divisible by the processes")
    make = options.pop("make")
    before, states = _run(_prepare(saved_on, make, **options), steps=3)
    assert all(s["version"] == VERSION for s in states)
    assert len({s["samples_seen"] for s in states}) == 1  # the same global position everywhere
    after, _ = _run(_prepare(resumed_on, make, **options), states=[states[0]] * resumed_on)
    whole, _ = _run(_prepare(saved_on, make, **options))  # the run that was not interrupted
    _check_exactly_once(_flat(before) + _flat(after), _flat(whole), make(), saved_on, resumed_on)


def _check_exactly_once(seen, uninterrupted, loader, saved_on, resumed_on):
    """The real samples come once each, in the uninterrupted run's order; padding only at the end."""
    size = len(set(uninterrupted) | set(seen)) if loader.drop_last else len(set(uninterrupted))
    real = _unique_prefix(seen)
    reference = _unique_prefix(uninterrupted)
    common = min(len(real), len(reference))  # with drop_last the sizes drop different tails
    assert real[:common] == reference[:common]
    padding = seen[len(real) :]
    widest = loader.batch_size * max(saved_on, resumed_on)
    if loader.drop_last:
        assert not padding and size - len(real) < widest
    else:
        assert len(real) == size and len(padding) < widest
        assert set(padding) <= set(real[:widest])  # drawn from the epoch's start


def _unique_prefix(items):
    seen = set()
    for index, item in enumerate(items):
        if item in seen:
            return items[:index]
        seen.add(item)
    return list(items)


def test_same_layout_resumes_batch_for_batch():
    make = LAYOUTS["shuffled"]["make"]
    first, states = _run(_prepare(2, make), steps=5)
    rest, _ = _run(_prepare(2, make), states=states)
    whole, _ = _run(_prepare(2, make))
    assert first + rest == whole


def test_default_order_continues_across_a_resize():
    """Without a seedable sampler the resumed epoch keeps the saved run's permutation."""
    make = LAYOUTS["shuffled"]["make"]
    whole, _ = _run(_prepare(2, make))
    before, states = _run(_prepare(2, make), steps=3)
    after, _ = _run(_prepare(1, make), states=[states[0]])
    assert _flat(before) + _flat(after) == _flat(whole)


def test_between_epochs_the_saved_generator_carries_over():
    """Saved after an epoch on 2 processes, the next epoch on 1 draws the order 2 would have."""
    make = LAYOUTS["shuffled"]["make"]
    two = _prepare(2, make)
    _run(two)
    second_epoch, _ = _run(_prepare(2, make), states=[two[0].state_dict()] * 2)
    state = two[0].state_dict()
    assert state["epoch"] == 1 and state["samples_seen"] == 0
    one, _ = _run(_prepare(1, make), states=[state])
    assert sorted(_flat(one)) == list(range(96))
    assert _flat(one) == _flat(second_epoch)


@pytest.mark.parametrize("resumed_on", [1, 2])
def test_another_dataset_length_mid_epoch_is_refused_naming_both(resumed_on):
    """Saved at sample 24 of a shuffled 96; resumed over 112 samples the permutation is another one."""
    _, states = _run(_prepare(2, LAYOUTS["shuffled"]["make"]), steps=3)
    assert states[0]["length"] == 96 and states[0]["samples_seen"] == 24
    (loader, *_) = _prepare(
        resumed_on, lambda: DataLoader(list(range(112)), batch_size=4, shuffle=True)
    )
    with pytest.raises(ResumeError) as info:
        loader.load_state_dict(states[0])
    message = str(info.value)
    assert "over 96 samples" in message and "this loader has 112" in message
    assert "\n" not in message


def test_another_dataset_length_at_an_epoch_boundary_is_fine():
    two = _prepare(2, LAYOUTS["shuffled"]["make"])
    _run(two)
    state = two[0].state_dict()
    assert state["epoch"] == 1 and state["samples_seen"] == 0
    longer, _ = _run(
        _prepare(1, lambda: DataLoader(list(range(112)), batch_size=4, shuffle=True)),
        states=[state],
    )
    assert sorted(_flat(longer)) == list(range(112))


def test_version_one_positions_are_read_with_the_saved_world_size():
    make = LAYOUTS["sequential"]["make"]
    before, states = _run(_prepare(2, make), steps=3)
    old = {"epoch": 0, "batches_yielded": 3}  # what accel 0.1 wrote, on 2 processes
    after, _ = _run(_prepare(1, make), states=[upgrade(old, num_processes=2)])
    assert _flat(before) + _flat(after) == list(range(96))


def test_custom_batch_sampler_continues_at_the_global_batch():
    def make():
        return DataLoader(list(range(48)), batch_sampler=_Pairs())

    before, states = _run(_prepare(2, make), steps=2)
    assert states[0]["samples_seen"] is None and states[0]["batches_seen"] == 4
    after, _ = _run(_prepare(1, make), states=[states[0]])
    assert _flat(before) + _flat(after) == list(range(48))


class _Pairs(BatchSampler):
    def __init__(self):
        super().__init__(SequentialSampler(range(48)), 4, False)

    def __iter__(self):
        for start in range(0, 48, 4):
            yield list(range(start, start + 4))

    def __len__(self):
        return 12


@pytest.mark.parametrize("saved_on, resumed_on", [(2, 1), (1, 2), (2, 4)])
def test_iterable_stream_continues(saved_on, resumed_on):
    def make():
        return DataLoader(Stream(96), batch_size=4)

    before, states = _run(_prepare(saved_on, make), steps=3)
    assert states[0]["samples_seen"] == 3 * 4 * saved_on
    after, _ = _run(_prepare(resumed_on, make), states=[states[0]] * resumed_on)
    _check_exactly_once(_flat(before) + _flat(after), list(range(96)), make(), saved_on, resumed_on)


def test_a_stateful_loader_refuses_a_resize_in_one_line():
    pytest.importorskip("torchdata")
    make = LAYOUTS["sequential"]["make"]
    _, states = _run(_prepare(2, make), steps=2)
    (loader,) = _prepare(1, make, use_stateful_dataloader=True)
    with pytest.raises(ResumeError, match="same number of processes") as info:
        loader.load_state_dict(states[0])
    assert "\n" not in str(info.value)


def test_resuming_deep_into_a_large_epoch_reads_no_data():
    class Counting(torch.utils.data.Dataset):
        reads = 0

        def __len__(self):
            return 2_000_000

        def __getitem__(self, index):
            Counting.reads += 1
            return index

    loader = prepare_data_loader(DataLoader(Counting(), batch_size=8, shuffle=True))
    state = {**loader.state_dict(), "num_processes": 2, "samples_seen": 1_000_000}
    state["sampler"] = {"seed": 5}
    start = time.perf_counter()
    loader.load_state_dict(state)
    first = next(iter(loader))
    elapsed = time.perf_counter() - start
    assert Counting.reads == 8 * 2  # the first batch, and the one read ahead
    assert len(first) == 8
    assert elapsed < 5  # the benchmark (tools/bench/elastic_resume.py) measures it properly
