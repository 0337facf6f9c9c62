"""FSDP2 sharded ``save_state(async_save=True)``, standard and raw DCP files, on 2 real gloo processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).parent / "workers" / "async_checks.py"


@pytest.mark.timeout(400)
@pytest.mark.parametrize("checkpoint_format", ["dcp", "raw"])
def test_async_fsdp_save_resumes_like_a_sync_one(tmp_path, checkpoint_format):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node=2", str(WORKER), "resume,naming,kinds", str(tmp_path)]
    env = {**os.environ, "ACCEL_USE_CPU": "1", "OMP_NUM_THREADS": "1"}
    env["ACCEL_FSDP_CHECKPOINT_FORMAT"] = checkpoint_format
    done = subprocess.run(command, capture_output=True, text=True, timeout=360, env=env)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    for check in ("resume", "naming", "kinds"):
        assert f"ok {check}" in done.stdout, done.stdout
