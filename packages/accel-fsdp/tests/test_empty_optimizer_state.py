"""FSDP2 (and FSDP2 x TP) checkpoints of an optimizer that holds no state, on 2 real gloo processes."""

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


@pytest.mark.four_processes
@pytest.mark.timeout(400)
def test_sgd_without_momentum_round_trips_under_fsdp_times_tp(tmp_path):
    """dp_shard=2 x tp=2: the full state is gathered over both mesh dimensions."""
    modes = "FULL_STATE_DICT:dp2tp2,SHARDED_STATE_DICT:dp2tp2"
    done = run_processes(WORKER, [modes, str(tmp_path)], nproc=4, timeout=360)
    for mode in ("FULL_STATE_DICT dp2tp2", "SHARDED_STATE_DICT dp2tp2"):
        assert f"ok {mode}" in done.stdout, done.stdout
