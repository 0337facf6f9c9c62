"""Helpers for the cluster launcher tests: the real `accel` executable with a clean environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ACCEL = Path(sys.executable).with_name("accel")
WORKERS = Path(__file__).parent / "workers"


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """os.environ without ACCEL_*, SLURM_*, MPI and torchrun variables; a private config dir."""
    drop = ("ACCEL_", "PET_", "TORCHELASTIC_", "SLURM_", "OMPI_", "PMI_", "PMIX_")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(drop)
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(
        ACCEL_CONFIG_DIR=str(tmp_path / "accel-config"), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1"
    )
    env.update(extra)
    return env


def start(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
    """Start ``accel ARGV`` in its own process group."""
    return subprocess.Popen(
        [str(ACCEL), *argv],
        env=env,
        cwd=str(cwd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish(processes: list[subprocess.Popen], timeout: float) -> list[tuple[int, str, str]]:
    """Wait for every process; on timeout kill every group and fail with their output."""
    results = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=timeout)
            results.append((process.returncode, out, err))
    except subprocess.TimeoutExpired:
        for process in processes:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        outputs = [p.communicate() for p in processes]
        pytest.fail(f"timed out after {timeout} s: {outputs}")
    return results
