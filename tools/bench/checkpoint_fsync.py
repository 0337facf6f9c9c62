"""What making a checkpoint durable costs: ``save_state`` with and without its fsync calls.

``save_state`` fsyncs every file and folder of the checkpoint before the manifest, and the
parent folder after the rename (``accel.checkpoint.durable``). This script saves the same
model and AdamW state (``--size-mb`` of state in all, a stack of ``Linear(1024, 1024)``) into
fresh folders, alternating two variants, and prints the medians side by side:

``fsync``     ``save_state`` as it is;
``no fsync``  the same with ``sync_tree`` / ``sync_dir`` made no-ops (what a save did before:
              only the manifest fsynced). Its files may still be in the page cache only.

The ratio is the cost of durability on this machine's disk (a tmpfs shows none; a network
file system more). One process, CPU; run it on the file system the checkpoints go to:

    uv run python tools/bench/checkpoint_fsync.py [--size-mb 400] [--repeat 7] [--dir PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import torch


@contextlib.contextmanager
def without_fsync() -> Iterator[None]:
    """``save_state`` without the data files' and folders' fsync (the manifest's stays)."""
    from accel.checkpoint import durable, layout, manifest

    saved = durable.sync_tree, manifest.sync_dir, layout.sync_dir
    durable.sync_tree = manifest.sync_dir = layout.sync_dir = lambda folder: None
    try:
        yield
    finally:
        durable.sync_tree, manifest.sync_dir, layout.sync_dir = saved


def build(size_mb: int):
    """An Accelerator with a model and AdamW state of about ``size_mb`` MB together."""
    from accel import Accelerator

    layers = max(1, round(size_mb * 2**20 / (3 * 4 * 1024 * 1025)))  # weights + 2 moments
    model = torch.nn.Sequential(*(torch.nn.Linear(1024, 1024) for _ in range(layers)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(2, 1024)).sum().backward()
    optimizer.step()  # the moments exist
    accelerator = Accelerator(cpu=True)
    model, optimizer = accelerator.prepare(model, optimizer)
    return accelerator, layers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=None, help="where to save (default: ./)")
    args = parser.parse_args()
    accelerator, layers = build(args.size_mb)
    root = Path(tempfile.mkdtemp(prefix="accel-fsync-bench-", dir=args.dir or Path.cwd()))
    times: dict[str, list[float]] = {"fsync": [], "no fsync": []}
    try:
        for index in range(2 * args.repeat + 2):  # the first round of each is a warm-up
            variant = "fsync" if index % 2 == 0 else "no fsync"
            folder = root / f"save-{index}"
            context = without_fsync() if variant == "no fsync" else contextlib.nullcontext()
            with context:
                start = time.perf_counter()
                accelerator.save_state(folder)
                elapsed = time.perf_counter() - start
            if index >= 2:
                times[variant].append(elapsed)
            shutil.rmtree(folder)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    with_sync, without = (statistics.median(times[v]) for v in ("fsync", "no fsync"))
    print(f"state: {layers} x Linear(1024, 1024) + AdamW moments, about {args.size_mb} MB")
    print(f"{'variant':<10} {'save s (median)':>16}")
    print(f"{'no fsync':<10} {without:>16.3f}")
    print(f"{'fsync':<10} {with_sync:>16.3f}")
    print(f"fsync / no fsync: {with_sync / without:.2f}x (medians of {args.repeat})")


if __name__ == "__main__":
    main()
