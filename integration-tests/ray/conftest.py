"""`accel launch --ray` tests: the session's loopback-only Ray cluster and the real `accel` program."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from accel.testing.processes import finish_processes, start_process

ACCEL = Path(sys.executable).with_name("accel")
WORKERS = Path(__file__).parent / "workers"
RAY_TRAIN = (
    Path(__file__).parents[2] / "packages" / "accel-ray" / "tests" / "workers" / "ray_train.py"
)
"""accel-ray's own training worker (plain script mode here)."""
_spec = importlib.util.spec_from_file_location(
    "quick_cluster", RAY_TRAIN.with_name("quick_cluster.py")
)
quick_cluster = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(quick_cluster)


@pytest.fixture(scope="session")
def ray_cluster():
    """The session's :func:`accel_ray.testing.shared_cluster`, quick to notice lost and new
    nodes (accel-ray's ``tests/workers/quick_cluster.py``); skipped without Ray."""
    pytest.importorskip("ray.train", reason="Ray (ray[train]) is not installed")
    return quick_cluster.quick_shared_cluster()


def launch_env(tmp_path: Path, cluster=None, **extra: str) -> dict[str, str]:
    """os.environ without ACCEL_* and torchrun variables, a private config dir, the cluster's variables."""
    base = cluster.environment() if cluster is not None else dict(os.environ)
    env = {
        k: v
        for k, v in base.items()
        if not k.startswith(("ACCEL_", "ACCELERATE_", "TORCHELASTIC_", "PET_"))
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(ACCEL_CONFIG_DIR=str(tmp_path / "accel-config"), PYTHONUNBUFFERED="1")
    if cluster is not None:
        env.update(quick_cluster.QUICK_TRAIN)
    env.update(extra)
    return env


def start(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
    """Start ``accel ARGV`` in its own process group, output captured."""
    return start_process([str(ACCEL), *argv], env, cwd)


def finish(process: subprocess.Popen, timeout: float) -> tuple[int, str, str]:
    """Wait for ``process``: its exit code and output (its process group killed on a timeout)."""
    return finish_processes([process], timeout)[0]
