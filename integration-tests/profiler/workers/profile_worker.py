"""Each rank profiles a DDP training step and writes its own Chrome trace (argv[1]: output root)."""

from __future__ import annotations

import os
import sys

import torch
from accel import Accelerator, ProfileKwargs

root = sys.argv[1]
accelerator = Accelerator(
    kwargs_handlers=[
        ProfileKwargs(
            activities=["cpu", "cuda"],
            record_shapes=True,
            with_flops=True,
            output_trace_dir=os.path.join(root, "trace"),
        )
    ]
)
assert accelerator.num_processes == 2, accelerator.num_processes
rank = accelerator.process_index
model = accelerator.prepare(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Linear(64, 4)))

with accelerator.profile() as prof:
    with torch.profiler.record_function(f"train_step_rank{rank}"):
        model(torch.randn(8, 32)).sum().backward()
assert isinstance(prof, torch.profiler.profile)
# every rank's file exists once profile() returned (it waits for all processes)
for other in range(accelerator.num_processes):
    assert os.path.getsize(os.path.join(root, "trace", f"profile_{other}.json")) > 0

ready = []
scheduled = ProfileKwargs(
    activities=["cpu"],
    schedule_option={"wait": 1, "warmup": 1, "active": 1, "repeat": 2},
    on_trace_ready=lambda p: ready.append(p.step_num),
    output_trace_dir=os.path.join(root, "scheduled"),
)
with accelerator.profile(scheduled) as prof:
    for _ in range(7):
        model(torch.randn(8, 32)).sum().backward()
        prof.step()
assert ready == [3, 6], ready
accelerator.print("ok profile")
