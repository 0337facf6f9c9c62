"""Fixtures for multi-process tests: run a worker script on real processes (torchrun, gloo) with a timeout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKERS = Path(__file__).parent / "workers"


def run_distributed(
    script: str, *args: str, nproc: int = 2, timeout: float = 240, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Launch ``workers/<script>`` on ``nproc`` processes; fail the test on non-zero exit or timeout."""
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
    full_env = {**os.environ, "ACCEL_USE_CPU": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=full_env)
    if result.returncode != 0:
        raise AssertionError(
            f"{script} failed with exit code {result.returncode}\n--- stdout\n{result.stdout[-6000:]}\n--- stderr\n{result.stderr[-6000:]}"
        )
    return result


@pytest.fixture
def distributed():
    """The :func:`run_distributed` function."""
    return run_distributed
