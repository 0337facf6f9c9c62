"""Helpers of the tracker integration tests: launch a worker on 2 processes, isolated from the user's setup."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKERS = Path(__file__).parent / "workers"

USER_SETUP_PREFIXES = ("ACCEL_", "WANDB_", "COMET_", "CLEARML_", "TRAINS_", "MLFLOW_", "DVC_", "AIM_")
"""Environment variables that could point a tracker at a server: removed for the workers."""


def isolated_env(home: Path) -> dict[str, str]:
    """The current environment without tracker/accel settings, with ``HOME`` = ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(USER_SETUP_PREFIXES)}
    env.pop("NETRC", None)
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        ACCEL_USE_CPU="1",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def launch(script: str, *args: str, out: Path, nproc: int = 2) -> subprocess.Popen:
    """Start ``workers/<script>`` on ``nproc`` processes with torch.distributed.run (not waited for)."""
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
    log = open(out / "launch.log", "w")
    return subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, text=True, env=isolated_env(out / "home"), cwd=out
    )


def wait(process: subprocess.Popen, out: Path, timeout: float) -> str:
    """Wait for ``process``; its output, or a failure showing it (killed after ``timeout`` s)."""
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"timed out after {timeout} s\n{(out / 'launch.log').read_text()[-8000:]}")
    output = (out / "launch.log").read_text()
    if process.returncode != 0:
        pytest.fail(f"exit code {process.returncode}\n{output[-8000:]}")
    return output


def run_distributed(script: str, *args: str, out: Path, timeout: float = 240) -> str:
    """Run ``workers/<script>`` on 2 processes in ``out`` and return its output."""
    return wait(launch(script, *args, out=out), out, timeout)
