"""Tracker conformance worker, run on every process by torchrun.

Usage: ``tracker_worker.py OUT NAME [NAME ...]``. For each NAME, in ``OUT/NAME`` (also the
working directory): ``Accelerator(log_with=NAME, project_dir=OUT/NAME)``,
``init_trackers("accel_conformance", config=CONFIG)``, ``log`` of ``metric`` = 1 + 0.5 * step
and a tensor ``loss`` at steps 0..3, then ``end_training()``. Only the main process may hold
a tracker; every rank writes ``rank<i>.json`` (the tracker names it holds).
"""

from __future__ import annotations

import json
import os
import sys

import torch

from accel import Accelerator
from accel.tracking import NoOpTracker

PROJECT = "accel_conformance"
"""The project / run name every tracker is started with."""
CONFIG = {"learning_rate": 0.01, "num_epochs": 2, "optimizer": "SGD"}
"""The configuration passed to ``init_trackers``."""
STEPS = [0, 1, 2, 3]
"""The steps logged."""


def metric(step: int) -> float:
    """The value of ``metric`` logged at ``step``."""
    return 1.0 + 0.5 * step


def loss(step: int) -> float:
    """The value of ``loss`` (logged as a 0-d tensor) at ``step``."""
    return 2.0 / (step + 1)


def track(name: str, out: str) -> None:
    """One short tracked run with ``log_with=name`` in ``out``."""
    os.makedirs(out, exist_ok=True)
    os.chdir(out)
    accelerator = Accelerator(log_with=name, project_dir=out)
    accelerator.init_trackers(PROJECT, config=CONFIG)
    names = [t.name for t in accelerator.trackers]
    if accelerator.is_main_process:
        assert names == [name], (names, name)
        assert not isinstance(accelerator.get_tracker(name), NoOpTracker)
    else:
        assert names == [], f"rank {accelerator.process_index} holds trackers {names}"
        assert isinstance(accelerator.get_tracker(name), NoOpTracker)
    for step in STEPS:
        accelerator.log({"metric": metric(step), "loss": torch.tensor(loss(step))}, step=step)
    accelerator.end_training()
    with open(os.path.join(out, f"rank{accelerator.process_index}.json"), "w") as f:
        json.dump({"trackers": names, "world_size": accelerator.num_processes}, f)
    accelerator.wait_for_everyone()
    accelerator.print(f"ok tracker {name}")


def main() -> None:
    """Track once per name given on the command line."""
    root = os.path.abspath(sys.argv[1])
    for name in sys.argv[2:]:
        track(name, os.path.join(root, name))


if __name__ == "__main__":
    main()
