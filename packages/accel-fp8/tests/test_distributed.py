"""torchao FP8 with FSDP2 on 2 real gloo processes, started through ``accel launch`` and its
``--fp8_*`` flags (the worker asserts; this test checks its exit status and output)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("accel_fsdp", reason="FSDP2 + FP8 needs accel-fsdp")
pytest.importorskip("torchao.float8", reason="the torchao backend needs torchao (accel-fp8[ao])")

WORKER = Path(__file__).parent / "workers" / "fsdp2_fp8.py"


@pytest.mark.timeout(300)
def test_fp8_trains_under_fsdp2_with_float8_all_gather():
    command = [
        sys.executable, "-m", "accel_cli", "launch", "--cpu", "--num_processes", "2",
        "--use_fsdp", "--mixed_precision", "fp8", "--fp8_backend", "ao",
        "--fp8_pad_inner_dim", "false", str(WORKER),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env.update(OMP_NUM_THREADS="1", ACCEL_CONFIG_DIR=os.devnull + "-none")
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=280)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"timed out\n{stdout[-3000:]}\n{stderr[-6000:]}")
    assert process.returncode == 0, f"exit {process.returncode}\n{stdout[-3000:]}\n{stderr[-6000:]}"
    assert "ok fsdp2 fp8" in stdout
