"""Accelerate-parity checks on 2 real gloo processes (issue 19): collectives, sharding, decorators.

Each check raises on a mismatch; rank 0 prints ``ok <name>`` after a check passed on both ranks.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
from accel import Accelerator, DataLoaderConfiguration, PartialState
from accel.data_loader import BatchSamplerShard
from accel.state import AcceleratorState, GradientState
from accel.utils import gather, reduce
from torch.utils.data import BatchSampler, DataLoader, Dataset, SequentialSampler

REFERENCE = (
    Path(__file__).resolve().parents[3]
    / "packages/accel-core/tests/data/accelerate_batch_shards.json"
)


def fresh(**kwargs) -> Accelerator:
    AcceleratorState._reset_state()
    GradientState._reset_state()
    return Accelerator(**kwargs)


def check_gather_requires_grad() -> None:
    """gather of a tensor that requires grad returns the gathered values (gloo has no all_gather_into_tensor)."""
    rank = PartialState().process_index
    weight = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    out = weight * (rank + 1)
    assert out.requires_grad
    gathered = gather(out)
    assert gathered.tolist() == [1.0, 2.0, 2.0, 4.0], gathered
    nested = gather({"loss": out.sum()})
    assert nested["loss"].tolist() == [3.0, 6.0], nested
    acc = fresh()
    assert acc.gather(out).tolist() == [1.0, 2.0, 2.0, 4.0]


def check_reduce_reductions() -> None:
    """reduce takes Accelerate's 'mean', 'sum', 'max' and 'none' ('none' sums without dividing)."""
    rank = PartialState().process_index
    t = torch.tensor([1.0 + 3 * rank, 5.0 - 4 * rank])  # rank 0: [1, 5], rank 1: [4, 1]
    assert reduce(t, "max").tolist() == [4.0, 5.0]
    assert reduce(t, "sum").tolist() == [5.0, 6.0]
    assert reduce(t, "mean").tolist() == [2.5, 3.0]
    assert reduce(t, "none").tolist() == [5.0, 6.0]
    assert reduce({"a": [t]}, reduction="max")["a"][0].tolist() == [4.0, 5.0]
    acc = fresh()
    assert acc.reduce(t, reduction="max").tolist() == [4.0, 5.0]


def check_uneven_batches() -> None:
    """even_batches=False: 3 samples, batch size 1, 2 processes: rank 1 iterates [[1]] (no empty batch)."""
    rank = PartialState().process_index
    acc = fresh(dataloader_config=DataLoaderConfiguration(even_batches=False))
    dl = acc.prepare(DataLoader(list(range(3)), batch_size=1))
    seen = [b.tolist() for b in dl]
    assert seen == ([[0], [2]] if rank == 0 else [[1]]), (rank, seen)
    assert len(dl) == (2 if rank == 0 else 1)
    # the opt-in: an empty batch keeps both ranks stepping together
    config = DataLoaderConfiguration(even_batches=False, empty_batches=True)
    acc = fresh(dataloader_config=config)
    dl = acc.prepare(DataLoader(list(range(3)), batch_size=1))
    seen = [b.tolist() for b in dl]
    assert seen == ([[0], [2]] if rank == 0 else [[1], []]), (rank, seen)


class Indexed(Dataset):
    """A dataset indexed by a list of indices (what a BatchSampler given as ``sampler=`` yields)."""

    def __len__(self) -> int:
        return 10

    def __getitem__(self, indices):
        return torch.tensor(indices) * 10


def check_batch_sampler_as_sampler() -> None:
    """prepare(DataLoader(ds, sampler=BatchSampler(...), batch_size=None)) shards through that sampler."""
    rank = PartialState().process_index
    acc = fresh()
    sampler = BatchSampler(SequentialSampler(range(10)), batch_size=2, drop_last=False)
    dl = acc.prepare(DataLoader(Indexed(), sampler=sampler, batch_size=None))
    seen = [b.tolist() for b in dl]
    expected = [[0, 10], [40, 50], [80, 90]] if rank == 0 else [[20, 30], [60, 70], [0, 10]]
    assert seen == expected, (rank, seen)
    assert dl.total_batch_size == 4


def check_sharding_matches_accelerate() -> None:
    """BatchSamplerShard on each real rank gives Accelerate 1.15's shards (committed reference)."""
    rank = PartialState().process_index
    cases = json.loads(REFERENCE.read_text())["cases"]
    checked = 0
    for case in cases:
        if case["num_processes"] != 2 or "samples" not in case:
            continue
        sampler = BatchSampler(
            SequentialSampler(range(case["samples"])), case["batch_size"], case["drop_last"]
        )
        shard = BatchSamplerShard(sampler, 2, rank, case["split_batches"], case["even_batches"])
        assert list(shard) == case["shards"][rank], (case, list(shard))
        assert len(shard) == case["lengths"][rank], (case, len(shard))
        checked += 1
    assert checked > 50, checked
    # and through prepare, with even_batches=False and split_batches=True: 7 samples, batch 4
    config = DataLoaderConfiguration(even_batches=False, split_batches=True)
    acc = fresh(dataloader_config=config)
    dl = acc.prepare(DataLoader(list(range(7)), batch_size=4))
    seen = [b.tolist() for b in dl]
    assert seen == ([[0, 1], [4, 5]] if rank == 0 else [[2, 3], [6]]), (rank, seen)


def check_local_process_decorator() -> None:
    """The seed's ``@accelerator.on_local_process(local_process_idx=0)`` runs on local rank 0 only."""
    acc = fresh()
    calls = []

    @acc.on_local_process(local_process_idx=0)
    def work():
        calls.append(acc.local_process_index)

    work()
    assert calls == ([0] if acc.local_process_index == 0 else []), calls


def check_save_state_own_directory() -> None:
    """save_state(d) where every rank passes its own directory (Accelerate allows it)."""
    rank = PartialState().process_index
    root = Path(os.environ["PARITY_TMP"])
    acc = fresh()
    model = acc.prepare(torch.nn.Linear(2, 2))
    target = root / f"rank{rank}"
    acc.save_state(target)
    acc.wait_for_everyone()
    assert target.is_dir(), target
    assert any(target.iterdir()), list(target.iterdir())
    acc.load_state(root / "rank0")
    del model


CHECKS = {
    "gather_grad": check_gather_requires_grad,
    "reduce": check_reduce_reductions,
    "uneven": check_uneven_batches,
    "batch_sampler": check_batch_sampler_as_sampler,
    "sharding": check_sharding_matches_accelerate,
    "local_process": check_local_process_decorator,
    "save_state_dirs": check_save_state_own_directory,
}


if __name__ == "__main__":
    PartialState()
    if "PARITY_TMP" not in os.environ:
        os.environ["PARITY_TMP"] = tempfile.gettempdir()
    failed = []
    for name in sys.argv[1:] or list(CHECKS):
        try:
            CHECKS[name]()
        except Exception as exc:  # report every check, then fail
            failed.append(name)
            print(f"FAIL {name} rank {dist.get_rank()}: {type(exc).__name__}: {exc}", flush=True)
            continue
        dist.barrier()
        if dist.get_rank() == 0:
            print(f"ok {name}", flush=True)
    sys.exit(1 if failed else 0)
