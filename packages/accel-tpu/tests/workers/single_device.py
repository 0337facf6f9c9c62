"""One XLA device (PJRT CPU): training, bf16, tied weights, collectives, checkpoints.

Run by tests/test_xla_device.py with ACCEL_DISTRIBUTED_TYPE=XLA; asserts here and prints
one JSON line of results for the test to check too.
"""

import json
import logging
import sys

import torch
from accel import Accelerator
from accel.state import AcceleratorState, GradientState
from accel.utils import DistributedType

checkpoint_dir = sys.argv[1]
results = {}


def fresh(**kwargs):
    AcceleratorState._reset_state()
    GradientState._reset_state()
    return Accelerator(**kwargs)


# -- training: the loss goes down, batches live on the XLA device ---------------------
torch.manual_seed(0)
acc = Accelerator()
assert acc.device.type == "xla", acc.device
assert acc.distributed_type == DistributedType.XLA == DistributedType.TPU
assert (acc.num_processes, acc.process_index) == (1, 0)
X = torch.randn(72, 4)
Y = X @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=16)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=100)
model, optimizer, loader, scheduler = acc.prepare(model, optimizer, loader, scheduler)
assert type(optimizer).__name__ == "XLAOptimizer"
assert model.weight.device.type == "xla"
epoch_losses = []
ends = []
for _epoch in range(6):
    total = torch.zeros((), device=acc.device)
    for x, y in loader:
        assert x.device.type == "xla" and x.shape == (16, 4) or x.shape == (8, 4), x.shape
        loss = torch.nn.functional.mse_loss(model(x), y)
        acc.backward(loss)
        norm = acc.clip_grad_norm_(model.parameters(), 100.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        total += loss.detach()
        ends.append(acc.gradient_state.end_of_dataloader)
    epoch_losses.append(total.item() / len(loader))
assert epoch_losses[-1] < epoch_losses[0] / 4, epoch_losses
assert ends[:5] == [False, False, False, False, True], ends[:5]  # flags exact: 5 batches/epoch
results["losses"] = epoch_losses
results["clip_norm_device"] = norm.device.type

# -- evaluation: gather_for_metrics and reduce (one replica: the identity) ------------
model.eval()
seen = []
for x, _y in loader:
    seen.append(acc.gather_for_metrics(model(x).detach()).cpu())
assert sum(len(s) for s in seen) == 72
assert acc.reduce(torch.tensor(3.0, device=acc.device), "mean").item() == 3.0
gathered = acc.gather({"a": torch.ones(2, device=acc.device)})
assert gathered["a"].shape == (2,)
acc.wait_for_everyone()

# -- checkpoints: CPU copies written, state restored onto the device -----------------
acc.save_state(checkpoint_dir)
state = acc.get_state_dict(model)
assert all(t.device.type == "cpu" for t in state.values())
before = model.weight.detach().cpu().clone()
with torch.no_grad():
    model.weight.zero_()
acc.load_state(checkpoint_dir)
assert torch.equal(model.weight.detach().cpu(), before)
assert model.weight.device.type == "xla"
results["checkpoint_files"] = True

# -- bf16 on XLA: the forward runs in bfloat16, outputs come back in float32 ----------
acc = fresh(mixed_precision="bf16")
probe = {}
net = torch.nn.Sequential(torch.nn.Linear(4, 4))
net[0].register_forward_hook(lambda m, i, o: probe.update(dtype=str(o.dtype)))
net = acc.prepare(net)
out = net(torch.randn(2, 4, device=acc.device))
assert probe["dtype"] == "torch.bfloat16", probe
assert out.dtype == torch.float32, out.dtype
results["bf16_inner_dtype"] = probe["dtype"]

# -- fp16 is refused with a clear message ---------------------------------------------
try:
    fresh(mixed_precision="fp16")
except ValueError as exc:
    assert "not supported on XLA devices" in str(exc) and "bf16" in str(exc), exc
    results["fp16_error"] = str(exc)
else:
    raise AssertionError("fp16 on XLA was accepted")


# -- tied weights: re-tied after the move when the model can, else a warning ----------
class Tied(torch.nn.Module):
    def __init__(self, with_tie_weights):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight
        if not with_tie_weights:
            self.tie_weights = None

    def tie_weights(self):
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.embed(ids))


class Capture(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


capture = Capture()
logging.getLogger("accel_tpu.backend").addHandler(capture)
acc = fresh()
torch.__future__.set_overwrite_module_params_on_conversion(True)  # .to() makes new Parameters
try:
    tied = acc.prepare(Tied(with_tie_weights=True))
    assert tied.head.weight is tied.embed.weight
    assert not capture.messages
    untied = acc.prepare(Tied(with_tie_weights=False))
    assert untied.head.weight is not untied.embed.weight
finally:
    torch.__future__.set_overwrite_module_params_on_conversion(False)
assert any("head.weight" in m and "tie_weights()" in m for m in capture.messages), capture.messages
results["tie_warning"] = capture.messages[0]
print(json.dumps(results))
