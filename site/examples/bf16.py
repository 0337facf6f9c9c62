"""bf16 mixed precision: the prepared model computes in bfloat16 and returns float32.

Run: ``python docs/examples/bf16.py`` (also on a CPU).
"""

import torch
from accel import Accelerator
from accel.utils import set_seed

set_seed(0)
# --8<-- [start:setup]
accelerator = Accelerator(mixed_precision="bf16")
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
model, optimizer = accelerator.prepare(model, optimizer)
# --8<-- [end:setup]

seen = []
model[0].register_forward_hook(lambda module, args, out: seen.append(out.dtype))

inputs = torch.randn(64, 16, device=accelerator.device)
targets = inputs.sum(dim=1, keepdim=True)
losses = []
for _ in range(30):
    outputs = model(inputs)  # runs under torch.autocast(dtype=torch.bfloat16)
    loss = torch.nn.functional.mse_loss(outputs, targets)
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    losses.append(loss.item())

# --8<-- [start:check]
print("inside the model:", seen[0])  # torch.bfloat16
print("returned:", outputs.dtype)  # torch.float32 (converted back)
with accelerator.autocast():  # the same precision for code outside the model
    print("outside, under accelerator.autocast():", (inputs @ inputs.T).dtype)
# --8<-- [end:check]
print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")
assert seen[0] == torch.bfloat16 and outputs.dtype == torch.float32
assert losses[-1] < losses[0] / 2
