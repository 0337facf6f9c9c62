"""Worker: a small deterministic DDP training run with preemption handling, resumable.

Arguments: PROJECT_DIR [--step-sleep S] [--epochs E] [--grace G]

Resumes by hand from the newest checkpoint under PROJECT_DIR/checkpoints (Accelerate's
manual recipe), trains, and rank 0 writes the final weights to PROJECT_DIR/final.pt.
Each rank appends the global step it finished to PROJECT_DIR/progress-rank<R>.
"""

import argparse
import os
import time
from pathlib import Path

import torch
from accel import Accelerator, PreemptionKwargs, ProjectConfiguration
from accel.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("project")
parser.add_argument("--step-sleep", type=float, default=0.0)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--grace", type=float, default=None)
args = parser.parse_args()
project = Path(args.project)

set_seed(0)
handlers = [PreemptionKwargs(grace_period=args.grace)] if args.grace is not None else []
accelerator = Accelerator(
    cpu=True,
    project_config=ProjectConfiguration(project_dir=str(project), automatic_checkpoint_naming=True),
    kwargs_handlers=handlers,
)
x = torch.randn(96, 4, generator=torch.Generator().manual_seed(1))
y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1
loader = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.9)
model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

checkpoints = project / "checkpoints"
if checkpoints.is_dir() and any(checkpoints.iterdir()):
    accelerator.load_state()  # the newest checkpoint
    accelerator.print(f"resumed at epoch {loader.epoch}, batch {loader.batches_yielded}")
rank = accelerator.process_index
progress = project / f"progress-rank{rank}"
step = int(progress.read_text().split()[-1]) if progress.exists() else 0
for _epoch in range(loader.epoch, args.epochs):
    for inputs, targets in loader:
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        accelerator.backward(loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        step += 1
        with open(progress, "a") as fh:
            fh.write(f"{step}\n")
        time.sleep(args.step_sleep)
accelerator.wait_for_everyone()
if accelerator.is_main_process:
    weights = {
        k: v.detach().clone() for k, v in accelerator.unwrap_model(model).state_dict().items()
    }
    torch.save(weights, project / "final.pt")
    print(f"finished after step {step} (pid {os.getpid()})", flush=True)
