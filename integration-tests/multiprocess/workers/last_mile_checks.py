"""Issue 29 on 2 real gloo processes: per-rank checkpoint directories, debug-mode padding, generators.

Launched with ``ACCELERATE_DEBUG_MODE=1`` (Accelerate's spelling). Each check raises on a
mismatch; rank 0 prints ``ok <name>`` after a check passed on both ranks.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from accel import Accelerator, PartialState
from accel.checkpoint.manifest import MANIFEST_NAME
from accel.state import AcceleratorState, GradientState
from accel.utils import DistributedOperationException, pad_across_processes
from torch.utils.data import DataLoader


def fresh() -> Accelerator:
    AcceleratorState._reset_state()
    GradientState._reset_state()
    return Accelerator()


def loader(acc: Accelerator) -> DataLoader:
    return acc.prepare(DataLoader(list(range(24)), batch_size=2, shuffle=True))


def batches(dl: DataLoader, count: int) -> list[list[int]]:
    """The next ``count`` batches of ``dl``, across epochs."""
    seen: list[list[int]] = []
    while len(seen) < count:
        for batch in dl:
            seen.append(batch.tolist())
            if len(seen) == count:
                return seen
    return seen


def check_per_rank_directories() -> None:
    """Every rank saves to and loads from its own directory: each resumes its own loader."""
    rank = PartialState().process_index
    root = Path(os.environ["LAST_MILE_TMP"])
    own = root / f"rank{rank}"
    torch.manual_seed(0)
    acc = fresh()
    dl = loader(acc)
    it = iter(dl)
    for _ in range(3):  # mid-epoch (6 batches per rank and epoch)
        next(it)
    acc.save_state(own)
    acc.save_state(root / "shared")  # one directory for both ranks
    expected = [batch.tolist() for batch in it] + batches(dl, 4)
    assert (own / "random_states_0.pkl").exists() == (rank == 0), list(own.iterdir())

    for source in (own, root / "shared"):
        torch.manual_seed(123)  # a fresh run: other seeds, the loader at its start
        acc = fresh()
        dl = loader(acc)
        acc.load_state(source)
        resumed = batches(dl, len(expected))
        assert resumed == expected, (rank, source.name, resumed, expected)

    # An older checkpoint holds the main process's position only: every rank starts from it.
    acc.wait_for_everyone()
    old = root / "old"
    if rank == 0:
        shutil.copytree(root / "shared", old)
        (old / MANIFEST_NAME).unlink()
        for path in old.glob("dl_state_dict*"):
            if path.name != "dl_state_dict.bin":
                path.unlink()
    acc.wait_for_everyone()
    torch.manual_seed(123)
    acc = fresh()
    dl = loader(acc)
    acc.load_state(old)
    assert batches(dl, len(expected)) == expected, rank


def check_pad_debug_mode() -> None:
    """Debug mode: pad_across_processes refuses tensors whose number of dimensions differs."""
    state = PartialState()
    assert state.debug, "ACCELERATE_DEBUG_MODE=1 did not turn debug mode on"
    rank = state.process_index
    padded = pad_across_processes(torch.ones(1 + rank, 3))  # only the padded dim differs
    assert padded.shape == (2, 3), padded.shape
    mismatched = torch.ones(2, 3) if rank == 0 else torch.ones(2, 3, 1)
    try:
        pad_across_processes(mismatched)
    except DistributedOperationException as exc:
        message = str(exc)
        assert "pad_across_processes" in message and "[2, 3, 1]" in message, message
    else:
        raise AssertionError("debug mode let pad_across_processes pad mismatched dimensions")


def check_reseeded_generator() -> None:
    """A prepared loader's generator, re-seeded before an epoch, repeats that epoch's order."""
    acc = fresh()
    generator = torch.Generator()
    dl = acc.prepare(DataLoader(list(range(16)), batch_size=2, shuffle=True, generator=generator))
    orders = []
    for seed in (5, 5, 7):
        generator.manual_seed(seed)
        orders.append([x for batch in dl for x in batch.tolist()])
    assert orders[0] == orders[1] != orders[2], orders
    everyone: list = [None, None]
    dist.all_gather_object(everyone, orders[0])
    assert sorted(everyone[0] + everyone[1]) == list(range(16)), everyone  # the ranks agree


CHECKS = {
    "per_rank_dirs": check_per_rank_directories,
    "pad_debug": check_pad_debug_mode,
    "reseeded_generator": check_reseeded_generator,
}


if __name__ == "__main__":
    PartialState()
    failed = []
    for name in sys.argv[1:] or list(CHECKS):
        try:
            CHECKS[name]()
        except Exception as exc:  # report every check, then fail
            failed.append(name)
            print(f"FAIL {name} rank {dist.get_rank()}: {type(exc).__name__}: {exc}", flush=True)
        dist.barrier()  # also after a failure: the next check starts together
        if dist.get_rank() == 0 and name not in failed:
            print(f"ok {name}", flush=True)
    sys.exit(1 if failed else 0)
