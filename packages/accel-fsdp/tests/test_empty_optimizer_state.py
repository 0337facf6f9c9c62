"""FSDP2 (and FSDP2 x TP) checkpoints of an optimizer that holds no state, on 2 real gloo processes.

No test here runs the worker's 4-process mode ``dp2tp2`` (dp_shard=2 x tp=2): it is not part
of CI, too slow for it on CPU (one mode took 80 s on a busy 2-core machine). Run it by hand:
``uv run torchrun --standalone --nproc_per_node 4
packages/accel-fsdp/tests/workers/empty_optimizer_checks.py
FULL_STATE_DICT:dp2tp2,SHARDED_STATE_DICT:dp2tp2 <folder>``."""

from __future__ import annotations

from pathlib import Path

import pytest
from accel.testing.processes import run_processes

WORKER = Path(__file__).parent / "workers" / "empty_optimizer_checks.py"


@pytest.mark.timeout(300)
def test_sgd_without_momentum_round_trips(tmp_path):
    """torch's full-state loader used to fail with "Expected device to be set"."""
    modes = "FULL_STATE_DICT:dp,FULL_STATE_DICT:tp,SHARDED_STATE_DICT:dp"
    done = run_processes(WORKER, [modes, str(tmp_path)], nproc=2, timeout=240)
    for mode in ("FULL_STATE_DICT dp", "FULL_STATE_DICT tp", "SHARDED_STATE_DICT dp"):
        assert f"ok {mode}" in done.stdout, done.stdout
