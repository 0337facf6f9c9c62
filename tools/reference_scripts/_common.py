"""Helpers shared by the reference scripts: options, RNG fingerprints, gathering, writing the JSON.

The reference scripts import ``accelerate`` only. Run in the reference venv they measure
Accelerate itself; run in the workspace they measure accel (through the accelerate-compat
distribution). Each writes ``{"script", "num_processes", "versions", "ranks": [...]}``: one
entry per process, each a mapping of case name to what the case recorded. Only ``ranks`` is
compared; ``versions`` says what produced the file.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def parse_args(description: str) -> argparse.Namespace:
    """``--output PATH`` (where the JSON goes) and ``--case NAME`` (run only these cases)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--output", required=True, help="the JSON file to write (main process)")
    parser.add_argument(
        "--case", action="append", default=[], help="run only this case (repeatable)"
    )
    return parser.parse_args()


def fingerprint(generator: torch.Generator | None = None) -> str:
    """A short digest of a generator's state (the global CPU generator by default); reads only."""
    state = torch.get_rng_state() if generator is None else generator.get_state()
    return hashlib.sha256(state.numpy().tobytes()).hexdigest()[:16]


def batches_of(loader: Any) -> list[list[int]]:
    """One epoch of ``loader``: every batch as a list of sample indices."""
    return [_indices(batch) for batch in loader]


def _indices(batch: Any) -> list[int]:
    if isinstance(batch, (list, tuple)):
        batch = batch[0]
    return [int(x) for x in batch.tolist()]


def versions() -> dict[str, str]:
    """The versions of what ran: accelerate (accel's compat distribution says so), torch, accel."""
    found = {}
    for name in ("accelerate", "torch", "accel-core", "transformers"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def dumps(document: Any) -> str:
    """JSON with one line per list of numbers (a batch, a list of losses), for readable diffs."""
    text = json.dumps(document, indent=1)
    flat = re.compile(r"\[\s*([-+.\deE]+(?:,\s*[-+.\deE]+)*)\s*\]")
    return (
        flat.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)
        + "\n"
    )


def rank_and_world() -> tuple[int, int]:
    """This process's rank and the number of processes (torch.distributed, else the launcher's env)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def run_cases(
    script: str,
    cases: dict[str, Callable[[], Any]],
    args: argparse.Namespace,
) -> None:
    """Run ``cases`` (all, or those named by ``--case``) in order; the main process writes the JSON."""
    import torch.distributed as dist

    unknown = set(args.case) - set(cases)
    if unknown:
        raise SystemExit(f"unknown case(s) {sorted(unknown)}; known: {sorted(cases)}")
    torch.set_num_threads(1)
    results = {name: case() for name, case in cases.items() if not args.case or name in args.case}
    rank, world = rank_and_world()
    ranks = [results]
    if world > 1:
        ranks = [None] * world
        dist.all_gather_object(ranks, results)
    if rank == 0:
        document = {
            "script": script,
            "num_processes": world,
            "versions": versions(),
            "ranks": ranks,
        }
        path = Path(args.output)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dumps(document))
    if world > 1:
        dist.barrier()
