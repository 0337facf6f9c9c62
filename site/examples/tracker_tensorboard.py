"""A tracker: log a config and a loss curve to TensorBoard, then read them back.

Needs ``accel-trackers[tensorboard]``. Run: ``python docs/examples/tracker_tensorboard.py [--project_dir DIR]``.
"""

import argparse
import tempfile
from pathlib import Path

import torch
from accel import Accelerator

parser = argparse.ArgumentParser()
parser.add_argument("--project_dir", default=None)
args = parser.parse_args()
project_dir = args.project_dir or tempfile.mkdtemp()

# --8<-- [start:log]
accelerator = Accelerator(log_with="tensorboard", project_dir=project_dir)
accelerator.init_trackers("demo", config={"lr": 0.05, "epochs": 3})

model = torch.nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
model, optimizer = accelerator.prepare(model, optimizer)
inputs = torch.randn(32, 3)
for step in range(20):
    loss = (model(inputs) - inputs.sum(dim=1, keepdim=True)).pow(2).mean()
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    accelerator.log({"train_loss": loss}, step=step)  # main process only
accelerator.end_training()  # flushes and closes every tracker
# --8<-- [end:log]

# Read the event file back with TensorBoard's own reader.
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

(run_dir,) = {p.parent for p in Path(project_dir).rglob("events.out.tfevents.*")}
events = EventAccumulator(str(run_dir))
events.Reload()
scalars = events.Scalars("train_loss")
print(
    f"{len(scalars)} scalars in {run_dir}; first {scalars[0].value:.3f}, last {scalars[-1].value:.3f}"
)
assert [s.step for s in scalars] == list(range(20))
assert scalars[-1].value < scalars[0].value
