"""Short 2-process trainings, one per tracker name, each in its own directory.

Usage: ``track_worker.py OUT NAME [NAME ...] [--all]``. For each NAME, in ``OUT/NAME``
(also the working directory): ``Accelerator(log_with=NAME, project_dir=OUT/NAME)``, a few
DDP steps logging ``metric`` = 1 + 0.5 * step and the loss tensor, then ``end_training()``.
With ``--all``, the same once more in ``OUT/all`` with ``log_with="all"``. Only the main
process may create runs; the other rank checks that every tracker call is accepted and
does nothing. Each phase ends with every rank writing ``rank<i>.json``.
"""

from __future__ import annotations

import json
import os
import sys

import torch
from accel import Accelerator
from accel.tracking import GeneralTracker, NoOpTracker, available_trackers

CONFIG = {
    "num_iterations": 2,
    "learning_rate": 0.01,
    "loss_function": str(torch.nn.MSELoss()),
    "nested": {"depth": 2},
}


def train(log_with: str, out: str) -> None:
    os.makedirs(out, exist_ok=True)
    os.chdir(out)
    accelerator = Accelerator(log_with=log_with, project_dir=out)
    assert accelerator.num_processes == 2, accelerator.num_processes
    accelerator.init_trackers("accel_test", config=CONFIG)
    names = [t.name for t in accelerator.trackers]
    if accelerator.is_main_process:
        expected = available_trackers() if log_with == "all" else [log_with]
        assert sorted(names) == sorted(expected), (names, expected)
    else:
        assert names == [], names

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=CONFIG["learning_rate"])
    data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    step = 0
    for _ in range(CONFIG["num_iterations"]):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            accelerator.backward(loss)
            optimizer.step()
            accelerator.log({"training_loss": loss, "metric": 1.0 + 0.5 * step}, step=step)
            step += 1

    for name in [log_with] if log_with != "all" else available_trackers():
        tracker = accelerator.get_tracker(name)
        run = accelerator.get_tracker(name, unwrap=True)
        if accelerator.is_main_process:
            assert tracker.name == name and not isinstance(tracker, NoOpTracker), tracker
            assert run is not None and run is tracker.tracker, (name, run)
        else:
            assert isinstance(tracker, NoOpTracker) and isinstance(tracker, GeneralTracker)
            # never an AttributeError on the other ranks, whatever rank 0's tracker offers
            tracker.log({"x": 1}, step=0)
            tracker.log_images({"img": torch.zeros(4, 4, 3)}, step=0)
            tracker.log_table("table", columns=["a"], data=[[1]])
            tracker.tracker.log_artifact("nothing")
            run.summary["x"] = 1
            tracker.store_init_configuration({"a": 1})
            tracker.finish()

    info = {"steps": step, "trackers": names}
    if "clearml" in names:  # where this run's offline session goes (HOME is shared by the phases)
        info["clearml_folder"] = str(
            accelerator.get_tracker("clearml").tracker.get_offline_mode_folder()
        )
    accelerator.end_training()
    with open(os.path.join(out, f"rank{accelerator.process_index}.json"), "w") as f:
        json.dump(info, f)
    accelerator.wait_for_everyone()
    accelerator.print(f"ok {log_with}")


root = sys.argv[1]
for tracker_name in [a for a in sys.argv[2:] if a != "--all"]:
    train(tracker_name, os.path.join(root, tracker_name))
if "--all" in sys.argv[2:]:
    train("all", os.path.join(root, "all"))
