"""Cost of preemption handling's per-step agreement (a one-element all-reduce of max).

Run on 2 gloo processes: ``accel launch --cpu --num_processes 2 tools/bench/preemption_overhead.py``.
Prints the time of one agreement and of one small training step without it, per rank 0.
"""

from __future__ import annotations

import time

import torch
from accel import Accelerator, PreemptionKwargs
from accel.faults import preemption

N = 2000
accelerator = Accelerator(cpu=True, kwargs_handlers=[PreemptionKwargs()])
handler = preemption.active()
for _ in range(50):  # warm-up
    handler.check()
accelerator.wait_for_everyone()
start = time.perf_counter()
for _ in range(N):
    handler.check()
agree = (time.perf_counter() - start) / N

model = torch.nn.Linear(64, 64)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
model, optimizer = accelerator.prepare(model, optimizer)
batch = torch.randn(32, 64)
for _ in range(20):
    accelerator.backward(model(batch).square().mean())
    optimizer.step()
    optimizer.zero_grad()
accelerator.wait_for_everyone()
start = time.perf_counter()
for _ in range(200):
    accelerator.backward(model(batch).square().mean())
    optimizer.step()
    optimizer.zero_grad()
step = (time.perf_counter() - start) / 200
if accelerator.is_main_process:
    print(
        f"preemption agreement: {agree * 1e6:.0f} us per step on {accelerator.num_processes} "
        f"process(es); a Linear(64, 64) DDP step: {step * 1e6:.0f} us ({agree / step:.1%})"
    )
