"""Gradient accumulation: 4 micro-batches of 8 give the same weights as batches of 32.

Run: ``python docs/examples/accumulation.py`` (exits 1 if the two runs differ).
"""

import torch
from accel import Accelerator
from accel.state import AcceleratorState, GradientState
from accel.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset

x = torch.randn(128, 8, generator=torch.Generator().manual_seed(0))
dataset = TensorDataset(x, x.sum(dim=1, keepdim=True))


def train(batch_size: int, steps: int) -> torch.Tensor:
    AcceleratorState._reset_state()  # a fresh Accelerator per run, in one process
    GradientState._reset_state()
    set_seed(0)
    # --8<-- [start:loop]
    accelerator = Accelerator(gradient_accumulation_steps=steps)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(dataset, batch_size=batch_size)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    for inputs, targets in loader:
        with accelerator.accumulate(model):  # one micro-batch
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            accelerator.backward(loss)  # divides the loss by `steps`
            optimizer.step()  # steps only when accelerator.sync_gradients
            optimizer.zero_grad()
    # --8<-- [end:loop]
    return accelerator.unwrap_model(model).weight.detach().clone()


accumulated = train(batch_size=8, steps=4)
full_batch = train(batch_size=32, steps=1)
print("max difference:", (accumulated - full_batch).abs().max().item())
raise SystemExit(0 if torch.allclose(accumulated, full_batch, atol=1e-6) else 1)
