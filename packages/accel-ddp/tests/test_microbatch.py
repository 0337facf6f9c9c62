"""``Accelerator.train_step`` under DDP on 2 real gloo processes (issue 44).

One launch runs every scenario of ``workers/microbatch_checks.py``: token-weighted exactness
for 4x2, 2x2 and 1x2 (micro-batches x processes), and a real CPU-allocator out-of-memory error
on rank 1 only (its address space capped) that makes both ranks split in the same step. The
checkpoint it saves is then loaded here, on one process: the split comes back.
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest
import torch
from accel import Accelerator
from accel.testing import run_processes

WORKER = Path(__file__).parent / "workers" / "microbatch_checks.py"


@pytest.mark.timeout(400)
def test_train_step_on_two_processes(tmp_path):
    results, checkpoint = tmp_path / "results.json", tmp_path / "checkpoint"
    run_processes(WORKER, [str(results), str(checkpoint)], nproc=2, timeout=380)
    found = json.loads(results.read_text())
    for split in ("4x2", "2x2", "1x2"):
        assert found[f"tokens {split}"] <= 1e-6, found
    # rank 1 alone ran out of memory on its 8 samples: both ranks split in step 1 and kept it
    assert found["oom sizes"] == [[4, 4, 4], [4, 4, 4]], found
    assert found["oom lines"] == ["out of memory with micro-batch 8: now 2 micro-batches of 4"]
    assert found["oom relative"] <= 1e-6, found

    # resumed on another number of processes (one): the split, in samples, is restored
    worker = runpy.run_path(str(WORKER))
    accelerator = Accelerator(cpu=True)
    model = worker["Wide"]()
    accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.5))
    assert accelerator.micro_batching.micro_batch_size is None
    accelerator.load_state(str(checkpoint))
    assert accelerator.micro_batching.micro_batch_size == 4
    assert accelerator.micro_batching.num_micro_batches(16) == 4
