"""Big-model inference: load a checkpoint into an empty model, one block in RAM, one on disk.

Run: ``python docs/examples/big_model_offload.py [--work_dir DIR]``. The dispatched model
gives the same outputs as the original; the disk block's weights live in ``offload/``.
"""

import argparse
import tempfile
from pathlib import Path

import torch
from accel import init_empty_weights, load_checkpoint_and_dispatch
from accel.utils import save_weights


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block0 = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU())
        self.block1 = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU())
        self.head = torch.nn.Linear(64, 4)

    def forward(self, x):
        return self.head(self.block1(self.block0(x)))


parser = argparse.ArgumentParser()
parser.add_argument("--work_dir", default=None)
args = parser.parse_args()
work = Path(args.work_dir or tempfile.mkdtemp())

torch.manual_seed(0)
reference = Net().eval()
save_weights(reference.state_dict(), str(work / "checkpoint"))  # model.safetensors
inputs = torch.randn(5, 32)

# --8<-- [start:dispatch]
with init_empty_weights():  # parameters on the "meta" device: no memory used
    model = Net()

model = load_checkpoint_and_dispatch(
    model,
    checkpoint=str(work / "checkpoint"),
    device_map={"block0": "cpu", "block1": "disk", "head": "cpu"},
    offload_folder=str(work / "offload"),  # block1's weights are memory-mapped from here
)
with torch.no_grad():
    outputs = model(inputs)  # block1 is loaded for its forward, then released
# --8<-- [end:dispatch]

with torch.no_grad():
    expected = reference(inputs)
offloaded = sorted(p.name for p in (work / "offload").iterdir())
print("offloaded files:", offloaded)
print("same outputs as the original:", torch.allclose(outputs, expected, atol=1e-6))
assert torch.allclose(outputs, expected, atol=1e-6)
assert offloaded and model.block1[0].weight.device.type == "meta"
