"""Helpers for the cluster launcher tests: the real `accel` executable with a clean environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from accel.testing.processes import finish_processes, start_process

ACCEL = Path(sys.executable).with_name("accel")
WORKERS = Path(__file__).parent / "workers"
finish = finish_processes
"""Wait for the started launches (their process groups killed on a timeout)."""


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
    return start_process([str(ACCEL), *argv], env, cwd)
