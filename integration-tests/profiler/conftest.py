"""Run a worker script on 2 real processes with torch.distributed.run (gloo on CPU), with a timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

WORKERS = Path(__file__).parent / "workers"


def _run_distributed(
    script: str, *args: str, nproc: int = 2, timeout: float = 240
) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "--max_restarts=0",
        str(WORKERS / script),
        *args,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env.update(ACCEL_USE_CPU="1", OMP_NUM_THREADS="1")
    # its own process group, so that a timeout ends the workers too, not only torchrun
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(
            f"{script} timed out after {timeout} s\n--- stdout\n{stdout[-6000:]}\n--- stderr\n{stderr[-6000:]}"
        )
    result = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    if result.returncode != 0:
        raise AssertionError(
            f"{script} exited with {result.returncode}\n--- stdout\n{result.stdout[-6000:]}\n--- stderr\n{result.stderr[-6000:]}"
        )
    return result


@pytest.fixture
def run_distributed():
    """``run_distributed(script, *args, nproc=2, timeout=240)``: fails the test on error or timeout."""
    return _run_distributed
