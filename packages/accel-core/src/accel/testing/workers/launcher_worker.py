"""Launcher conformance worker: every process it starts writes who it is.

Usage: ``launcher_worker.py OUT``. Each process writes ``OUT/<pid>.json`` with the rank,
world size and local rank that accel's process state (``PartialState``) sees, then meets
the others at a barrier (so a world that was announced but not started hangs and fails).
"""

from __future__ import annotations

import json
import os
import sys

from accel import PartialState


def main() -> None:
    """Record this process's place in the job."""
    state = PartialState()
    record = {
        "rank": state.process_index,
        "world_size": state.num_processes,
        "local_rank": state.local_process_index,
        "pid": os.getpid(),
    }
    state.wait_for_everyone()
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{os.getpid()}.json"), "w", encoding="utf-8") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main()
