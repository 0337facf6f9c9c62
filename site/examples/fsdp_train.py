"""FSDP on 2 CPU processes: shard a model with FSDP2 and train it.

Run: ``accel launch --cpu --num_processes 2 docs/examples/fsdp_train.py`` (needs accel-fsdp).
"""

import torch
from accel import Accelerator, FullyShardedDataParallelPlugin
from accel.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset

set_seed(0)
x = torch.randn(256, 16, generator=torch.Generator().manual_seed(0))
dataset = TensorDataset(x, x.sum(dim=1, keepdim=True).tanh())

# --8<-- [start:fsdp]
plugin = FullyShardedDataParallelPlugin(fsdp_version=2, sharding_strategy="FULL_SHARD")
accelerator = Accelerator(fsdp_plugin=plugin)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)  # before or after prepare
loader = DataLoader(dataset, batch_size=16, shuffle=True)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

losses = []
for epoch in range(3):
    for inputs, targets in loader:
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(model.parameters(), 1.0)  # over the shards
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    accelerator.print(f"epoch {epoch}: loss {loss.item():.4f}")
state_dict = accelerator.get_state_dict(model)  # the full weights, gathered on rank 0
# --8<-- [end:fsdp]
print(f"rank {accelerator.process_index}: distributed type {accelerator.distributed_type}")
assert str(accelerator.distributed_type).endswith("FSDP") and accelerator.num_processes == 2
if accelerator.is_main_process:
    assert state_dict["0.weight"].shape == (64, 16)
    assert losses[-1] < losses[0] / 4, (losses[0], losses[-1])
