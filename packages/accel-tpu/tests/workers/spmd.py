"""SPMD over 2 virtual CPU devices: one process, batches sharded on the ``data`` mesh axis.

Run by tests/test_xla_device.py with PJRT_DEVICE=CPU CPU_NUM_DEVICES=2 and
ACCEL_DISTRIBUTED_TYPE=XLA; asserts here and prints one JSON line.
"""

import json

import torch
import torch_xla
import torch_xla.runtime as xr
from accel import Accelerator

xr.use_spmd()  # before the Accelerator: one process drives both devices
torch.manual_seed(0)
acc = Accelerator()
assert acc.num_processes == 1 and xr.global_runtime_device_count() == 2
X = torch.randn(64, 4)
Y = X @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=16)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer, loader = acc.prepare(model, optimizer, loader)
specs = set()
losses = []
for _epoch in range(5):
    total = torch.zeros((), device=acc.device)
    for x, y in loader:
        specs.add(torch_xla._XLAC._get_xla_sharding_spec(x))
        loss = torch.nn.functional.mse_loss(model(x), y)
        acc.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        total += loss.detach()
    losses.append(total.item() / len(loader))
assert specs == {"{devices=[2,1]0,1}"}, specs
assert losses[-1] < losses[0] / 4, losses
print(json.dumps({"specs": sorted(specs), "losses": losses}))
