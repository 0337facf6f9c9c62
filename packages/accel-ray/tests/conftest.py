"""accel-ray's tests: one loopback-only Ray cluster for the whole session."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "quick_cluster", Path(__file__).parent / "workers" / "quick_cluster.py"
)
quick_cluster = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(quick_cluster)


@pytest.fixture(scope="session")
def ray_cluster():
    """The session's :func:`accel_ray.testing.shared_cluster`, quick to notice lost and new
    nodes (``workers/quick_cluster.py``); skipped without Ray."""
    pytest.importorskip("ray.train", reason="Ray (ray[train]) is not installed")
    return quick_cluster.quick_shared_cluster()


@pytest.fixture(scope="session")
def quick_train() -> dict[str, str]:
    """Variables for a Ray Train driver on that cluster: its controller polls the workers
    every 0.5 s (Ray's default: 2 s)."""
    return dict(quick_cluster.QUICK_TRAIN)
