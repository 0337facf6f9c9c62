"""DeepSpeed ZeRO-2 on 2 CPU processes (optimizer states and gradients sharded).

Run: ``accel launch --cpu --num_processes 2 docs/examples/deepspeed_zero2.py`` (needs
accel-deepspeed; the first run compiles DeepSpeed's CPU communication op with gcc).
"""

import torch
from accel import Accelerator, DeepSpeedPlugin
from accel.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset

set_seed(0)
x = torch.randn(128, 8, generator=torch.Generator().manual_seed(0))
dataset = TensorDataset(x, x.sum(dim=1, keepdim=True).tanh())

# --8<-- [start:zero2]
plugin = DeepSpeedPlugin(zero_stage=2, gradient_accumulation_steps=1, gradient_clipping=1.0)
accelerator = Accelerator(deepspeed_plugin=plugin)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
loader = DataLoader(dataset, batch_size=8, shuffle=True)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)  # a DeepSpeed engine

losses = []
for epoch in range(3):
    for inputs, targets in loader:
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        accelerator.backward(loss)  # the engine's backward
        optimizer.step()  # the engine's step (clipping included)
        optimizer.zero_grad()
        losses.append(loss.item())
    accelerator.print(f"epoch {epoch}: loss {loss.item():.4f}")
# --8<-- [end:zero2]
print(f"rank {accelerator.process_index}: distributed type {accelerator.distributed_type}")
assert str(accelerator.distributed_type).endswith("DEEPSPEED") and accelerator.num_processes == 2
assert losses[-1] < losses[0] / 4, (losses[0], losses[-1])
