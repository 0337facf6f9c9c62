"""Checkpoint and exact resume: a run stopped and resumed ends with the same weights.

Run: ``python docs/examples/checkpoint_resume.py [--output_dir DIR]``. It trains 2 epochs
without interruption, then again stopping after 5 steps (``save_state``), then resumes from
the checkpoint with a new model, optimizer and loader (``load_state``) and compares.
"""

import argparse
import tempfile

import torch
from accel import Accelerator
from accel.state import AcceleratorState, GradientState
from accel.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 2
x = torch.randn(96, 4, generator=torch.Generator().manual_seed(0))
dataset = TensorDataset(x, (x[:, :1] * 3 - x[:, 1:2]).sin())


def objects(seed: int):
    """A fresh Accelerator, model, optimizer, scheduler and shuffling loader."""
    AcceleratorState._reset_state()
    GradientState._reset_state()
    set_seed(seed)
    accelerator = Accelerator()
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 16), torch.nn.Dropout(0.1), torch.nn.Linear(16, 1)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)
    loader = DataLoader(dataset, batch_size=8, shuffle=True)
    return accelerator, *accelerator.prepare(model, optimizer, loader, scheduler)


def train(accelerator, model, optimizer, loader, scheduler, stop_after=None, save_to=None):
    step = 0
    # --8<-- [start:resume-loop]
    start_epoch = loader.epoch  # epochs already completed (0 on a fresh run)
    for _epoch in range(start_epoch, EPOCHS):
        for inputs, targets in loader:  # after load_state, continues mid-epoch
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
            if step == stop_after:
                accelerator.save_state(save_to)  # model, optimizer, scheduler, loader, RNG
                return None
    # --8<-- [end:resume-loop]
    return accelerator.unwrap_model(model)[0].weight.detach().clone()


parser = argparse.ArgumentParser()
parser.add_argument("--output_dir", default=None)
args = parser.parse_args()
checkpoint = f"{args.output_dir or tempfile.mkdtemp()}/checkpoint"

uninterrupted = train(*objects(seed=0))
train(*objects(seed=0), stop_after=5, save_to=checkpoint)

# --8<-- [start:load]
accelerator, model, optimizer, loader, scheduler = objects(seed=123)  # a new run
accelerator.load_state(checkpoint)  # everything prepared, in the same order as at save
print("resuming at epoch", loader.epoch, "after", loader.state_dict()["batches_yielded"], "batches")
# --8<-- [end:load]
resumed = train(accelerator, model, optimizer, loader, scheduler)
print("identical to the uninterrupted run:", torch.equal(resumed, uninterrupted))
raise SystemExit(0 if torch.equal(resumed, uninterrupted) else 1)
