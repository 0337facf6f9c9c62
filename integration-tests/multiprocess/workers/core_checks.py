"""Checks of accel-core's multi-process features on 2 real processes (no model wrapping needed)."""

from __future__ import annotations

import datetime
import itertools
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
from accel import Accelerator, DataLoaderConfiguration, InitProcessGroupKwargs, PartialState
from accel.state import AcceleratorState, GradientState
from accel.utils import (
    DistributedOperationException,
    broadcast,
    broadcast_object_list,
    gather,
    gather_object,
    gather_uneven,
    pad_across_processes,
    reduce,
    set_seed,
    synchronize_rng_states,
)
from torch.utils.data import DataLoader, IterableDataset


def fresh(**kwargs) -> Accelerator:
    AcceleratorState._reset_state()
    GradientState._reset_state()
    return Accelerator(**kwargs)


class Stream(IterableDataset):
    def __init__(self, n: int):
        self.n = n

    def __iter__(self):
        yield from range(self.n)


def check_operations() -> None:
    state = PartialState()
    rank = state.process_index
    t = torch.tensor([rank, rank + 10])
    assert gather(t).tolist() == [0, 10, 1, 11]
    nested = gather({"a": t, "b": [t * 2]})
    assert nested["b"][0].tolist() == [0, 20, 2, 22]
    assert gather_object([f"r{rank}"]) == ["r0", "r1"]
    assert reduce(torch.tensor([1.0 + rank]), "sum").item() == 3.0
    assert reduce(torch.tensor([1.0 + rank]), "mean").item() == 1.5
    b = broadcast(torch.tensor([rank * 5.0]), from_process=1)
    assert b.item() == 5.0
    objs = broadcast_object_list([{"rank": rank}])
    assert objs == [{"rank": 0}]
    ragged = torch.ones(rank + 1, 2) * (rank + 1)
    padded = pad_across_processes(ragged, dim=0, pad_index=-1)
    assert padded.shape == (2, 2)
    if rank == 0:
        assert padded[1].tolist() == [-1, -1]
    first = pad_across_processes(ragged, dim=0, pad_index=-1, pad_first=True)
    if rank == 0:
        assert first[0].tolist() == [-1, -1] and first[1].tolist() == [1, 1]
    torch.manual_seed(rank)
    synchronize_rng_states(["torch"])
    draws = gather(torch.rand(1))
    assert draws[0] == draws[1], "synchronize_rng_states did not align the torch RNG"


def check_split_between_processes() -> None:
    state = PartialState()
    with state.split_between_processes(["a", "b", "c"]) as part:
        assert part == (["a", "b"] if state.process_index == 0 else ["c"])
    with state.split_between_processes(["a", "b", "c"], apply_padding=True) as part:
        assert part == (["a", "b"] if state.process_index == 0 else ["c", "c"])
    with state.split_between_processes({"x": [1, 2, 3, 4], "y": ("p", "q", "r", "s")}) as part:
        assert part == (
            {"x": [1, 2], "y": ("p", "q")}
            if state.process_index == 0
            else {"x": [3, 4], "y": ("r", "s")}
        )
    with state.split_between_processes(torch.arange(5)) as part:
        assert part.tolist() == ([0, 1, 2] if state.process_index == 0 else [3, 4])


def check_triggers_and_ordering() -> None:
    acc = fresh()
    assert not acc.check_trigger()
    if acc.process_index == 1:
        acc.set_trigger()
    assert acc.check_trigger(), "a trigger set on rank 1 must be seen by every rank"
    assert not acc.check_trigger(), "the trigger is reset after being seen"
    folder = tempfile.gettempdir()
    marker = os.path.join(folder, f"accel-mpf-{os.environ['TORCHELASTIC_RUN_ID']}")
    with acc.main_process_first():
        if acc.is_main_process:
            time.sleep(0.5)
            with open(marker, "w") as f:
                f.write("main")
        else:
            assert os.path.exists(marker), "main_process_first: rank 1 ran before rank 0 finished"
    acc.wait_for_everyone()
    if acc.is_main_process:
        os.remove(marker)
    calls = []
    acc.on_main_process(lambda: calls.append("main"))()
    acc.on_last_process(lambda: calls.append("last"))()
    acc.on_process(lambda: calls.append("p1"), process_index=1)()
    assert calls == (["main"] if acc.process_index == 0 else ["last", "p1"])


def check_gather_for_metrics_grid() -> None:
    """Every (length, batch, drop_last, split_batches, even_batches, kind, dispatch) combination."""
    failures = []
    combos = itertools.product(
        [1, 2, 7, 8, 13, 16],
        [1, 2, 3, 4],
        [False, True],
        [False, True],
        [True, False],
        ["map", "iterable"],
        [False, True],
    )
    for n, bs, drop_last, split, even, kind, dispatch in combos:
        if split and bs % 2:
            continue
        acc = fresh(
            dataloader_config=DataLoaderConfiguration(
                split_batches=split,
                even_batches=even,
                dispatch_batches=dispatch,
                empty_batches=not even,  # the opt-in that keeps every gather matched
            )
        )
        data = list(range(n)) if kind == "map" else Stream(n)
        dl = acc.prepare(DataLoader(data, batch_size=bs, drop_last=drop_last))
        seen: list[int] = []
        for batch in dl:
            seen.extend(acc.gather_for_metrics(batch).tolist())
        dup = len(seen) != len(set(seen))
        if drop_last:
            ok = not dup and len(seen) <= n
        else:
            ok = sorted(seen) == list(range(n))
        if not ok:
            failures.append((n, bs, drop_last, split, even, kind, dispatch, seen))
    assert not failures, f"{len(failures)} gather_for_metrics failures, first: {failures[:3]}"
    # even_batches=False, empty_batches=True: rank 1 has no sample left for the last round and
    # gets an empty batch of the same structure, so both ranks take 2 steps and two gathers per
    # step stay matched.
    acc = fresh(dataloader_config=DataLoaderConfiguration(even_batches=False, empty_batches=True))
    records = [{"x": torch.full((3,), float(i)), "name": f"s{i}"} for i in range(5)]
    dl = acc.prepare(DataLoader(records, batch_size=2))
    assert len(dl) == 2
    xs, names, steps = [], [], 0
    for batch in dl:
        steps += 1
        xs.extend(acc.gather_for_metrics(batch["x"])[:, 0].tolist())
        names.extend(acc.gather_for_metrics(batch["name"]))
    assert steps == 2, steps
    assert sorted(xs) == [0.0, 1.0, 2.0, 3.0, 4.0], xs
    assert sorted(names) == [f"s{i}" for i in range(5)], names
    acc = fresh()
    dl = acc.prepare(DataLoader(list(range(5)), batch_size=2))
    seen_objects: list = []
    for batch in dl:
        seen_objects.extend(
            acc.gather_for_metrics([f"s{i}" for i in batch.tolist()], use_gather_object=True)
        )
    assert sorted(seen_objects) == [f"s{i}" for i in range(5)], seen_objects


def check_debug_mode() -> None:
    state = PartialState()
    state.debug = True
    try:
        t = torch.zeros(2, 3 + state.process_index)
        start = time.monotonic()
        try:
            gather(t)
        except DistributedOperationException as exc:
            message = str(exc)
            assert "gather" in message and "[2, 3]" in message and "[2, 4]" in message, message
        else:
            raise AssertionError("debug mode let a mismatched gather through")
        assert time.monotonic() - start < 10
        try:
            reduce(torch.zeros(1 + state.process_index))
        except DistributedOperationException:
            pass
        else:
            raise AssertionError("debug mode let a mismatched reduce through")
        assert gather_uneven(torch.zeros(1 + state.process_index, 2)).shape == (3, 2)
    finally:
        state.debug = False


def check_sharded_epochs() -> None:
    acc = fresh()
    dl = acc.prepare(DataLoader(list(range(12)), batch_size=2, shuffle=True))
    epochs = []
    for _ in range(2):
        mine = [i for b in dl for i in b.tolist()]
        everyone = gather_object([mine])
        assert sorted(everyone[0] + everyone[1]) == list(range(12)), (
            "shards must partition the dataset"
        )
        epochs.append(everyone)
    assert epochs[0] != epochs[1], "the permutation must change with the epoch"


def check_process_group_timeout() -> None:
    """The InitProcessGroupKwargs timeout given to the first Accelerator reaches the process group."""
    group = dist.distributed_c10d._get_default_group()
    timeout = group._get_backend(torch.device("cpu")).options._timeout
    assert timeout == datetime.timedelta(seconds=77), timeout
    assert PartialState().timeout == datetime.timedelta(seconds=77)


def check_stateful_dataloader() -> None:
    """use_stateful_dataloader=True: torchdata's StatefulDataLoader carries the position."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    folder = broadcast_object_list(
        [tempfile.mkdtemp() if PartialState().is_main_process else None]
    )[0]
    cases = [("map", 0, False), ("map", 2, False), ("iterable", 0, False), ("map", 0, True)]
    for kind, workers, dispatch in cases:
        config = DataLoaderConfiguration(use_stateful_dataloader=True, dispatch_batches=dispatch)

        def loader(acc, kind=kind, workers=workers):
            set_seed(5)  # the same shuffling seed for the uninterrupted and the interrupted run
            data = list(range(40)) if kind == "map" else Stream(40)
            shuffle = kind == "map"
            return acc.prepare(DataLoader(data, batch_size=3, shuffle=shuffle, num_workers=workers))

        acc = fresh(dataloader_config=config)
        dl = loader(acc)
        assert isinstance(dl, StatefulDataLoader), type(dl)
        straight = [b.tolist() for b in dl] + [b.tolist() for b in dl]  # two epochs
        acc = fresh(dataloader_config=config)
        dl = loader(acc)
        first = [b.tolist() for b in itertools.islice(dl, 4)]
        target = os.path.join(folder, f"{kind}-{workers}-{dispatch}")
        acc.save_state(target)
        acc = fresh(dataloader_config=config)
        dl = loader(acc)
        acc.load_state(target)
        state = dl.position_state_dict()  # what save_state wrote
        assert state["batches_yielded"] == 4 and "stateful_dataloader" in state, state
        assert dl.state_dict() == state["stateful_dataloader"]  # torchdata's, as in Accelerate
        rest = [b.tolist() for b in dl] + [b.tolist() for b in dl]
        assert first + rest == straight, (kind, workers, dispatch, first + rest, straight)


CHECKS = {
    "timeout": check_process_group_timeout,
    "operations": check_operations,
    "split": check_split_between_processes,
    "triggers": check_triggers_and_ordering,
    "gather_for_metrics": check_gather_for_metrics_grid,
    "debug": check_debug_mode,
    "epochs": check_sharded_epochs,
    "stateful": check_stateful_dataloader,
}


if __name__ == "__main__":
    Accelerator(kwargs_handlers=[InitProcessGroupKwargs(timeout=datetime.timedelta(seconds=77))])
    for name in sys.argv[1:] or list(CHECKS):
        CHECKS[name]()
        if dist.get_rank() == 0:
            print(f"ok {name}", flush=True)
