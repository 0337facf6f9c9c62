"""Helpers of accel-tpu's tests: a clean environment, subprocess runs, a worker's JSON result.

The tests run in the workspace's environment (the torch_xla ones skip there) and in
packages/accel-tpu/xla-env (torch 2.9 + torch_xla 2.9.0, on PJRT's CPU devices).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKERS = Path(__file__).parent / "workers"
ACCEL = Path(sys.executable).with_name("accel")


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """os.environ without ACCEL_* / XLA / torchrun variables, with a private config dir."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ACCEL_", "PJRT_", "XLA_", "TPU_", "CPU_NUM_DEVICES"))
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(ACCEL_CONFIG_DIR=str(tmp_path / "accel-config"), PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def run_command(
    argv: list[str], env: dict[str, str], timeout: float, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """Run ``argv`` (output captured); a timeout fails the test with what was printed so far."""
    try:
        return subprocess.run(
            argv,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{argv} timed out after {timeout} s:\n{exc.stdout}\n{exc.stderr}")


def last_json(proc: subprocess.CompletedProcess) -> dict:
    """The JSON object a worker printed last, after checking that it succeeded."""
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])
