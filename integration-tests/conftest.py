"""Shared fixture: run a test folder's ``workers/<script>`` on real processes (torchrun, gloo) with a timeout."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest


def _run_distributed(
    workers: Path,
    script: str,
    *args: str,
    nproc: int = 2,
    timeout: float = 240,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "--max_restarts=0",
        str(workers / script),
        *args,
    ]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCEL_", "ACCELERATE_"))}
    full_env.update(ACCEL_USE_CPU="1", OMP_NUM_THREADS="1", **(env or {}))
    # its own process group, so that a timeout ends the workers too, not only torchrun
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
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
def run_distributed(request):
    """``run_distributed(script, *args, nproc=2, timeout=240, env=None)`` for the test's ``workers/`` folder.

    Fails the test on a non-zero exit; on timeout the whole process group is killed.
    """
    return functools.partial(_run_distributed, request.path.parent / "workers")
