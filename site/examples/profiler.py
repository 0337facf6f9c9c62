"""Profile a few training steps with ``accelerator.profile()`` and write a Chrome trace.

Needs ``accel-profiler``. Run: ``python docs/examples/profiler.py [--trace_dir DIR]``.
"""

import argparse
import json
import tempfile
from pathlib import Path

import torch
from accel import Accelerator, ProfileKwargs

parser = argparse.ArgumentParser()
parser.add_argument("--trace_dir", default=None)
args = parser.parse_args()
trace_dir = args.trace_dir or tempfile.mkdtemp()

# --8<-- [start:profile]
profile_kwargs = ProfileKwargs(activities=["cpu"], record_shapes=True, output_trace_dir=trace_dir)
accelerator = Accelerator(kwargs_handlers=[profile_kwargs])
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
model, optimizer = accelerator.prepare(model, optimizer)

inputs = torch.randn(32, 64)
with accelerator.profile() as prof:  # a running torch.profiler.profile
    for _ in range(3):
        loss = model(inputs).square().mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=5))
# --8<-- [end:profile]

trace = Path(trace_dir) / f"profile_{accelerator.process_index}.json"
events = json.loads(trace.read_text())["traceEvents"]
print(f"{trace}: {len(events)} events")
assert any("addmm" in str(e.get("name", "")) for e in events)
