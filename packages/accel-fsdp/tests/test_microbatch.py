"""``Accelerator.train_step`` under FSDP2 on 2 real gloo processes (issue 44).

Token-weighted exactness with 1, 2 and 4 micro-batches per process, with gradient accumulation
(FSDP2's unsharded gradients carried into the reducing backward), and an out-of-memory error
raised on rank 1 only after its forward, and in the middle of the forward of a model of four
FSDP units (the other rank going on to the next unit's all-gather), and in the middle of its
backward under ``no_sync`` (FSDP2 all-gathers again in backward): see
``workers/microbatch_checks.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from accel.testing import run_processes

WORKER = Path(__file__).parent / "workers" / "microbatch_checks.py"


@pytest.mark.timeout(400)
def test_train_step_under_fsdp2(tmp_path):
    results = tmp_path / "results.json"
    run_processes(WORKER, [str(results)], nproc=2, timeout=380)
    found = json.loads(results.read_text())
    assert set(found) == {
        "split 1",
        "split 2",
        "split 4",
        "accumulate",
        "oom rank 1",
        "oom rank 1 accumulate",
        "oom rank 1 mid-forward",
        "oom rank 1 mid-forward accumulate",
        "oom rank 1 mid-backward",
    }
    for name, (difference, _size) in found.items():
        assert difference <= 1e-6, (name, found)
    assert found["oom rank 1"][1] == 2  # rank 1's 4 samples did not fit: both ranks split
    assert found["oom rank 1 accumulate"][1] == 1
    assert found["oom rank 1 mid-forward"][1] == 2
    assert found["oom rank 1 mid-forward accumulate"][1] == 1
    assert found["oom rank 1 mid-backward"][1] == 1
