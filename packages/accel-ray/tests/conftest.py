"""accel-ray's tests: one loopback-only Ray cluster for the whole session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    """The session's :func:`accel_ray.testing.shared_cluster` (skipped without Ray)."""
    pytest.importorskip("ray.train", reason="Ray (ray[train]) is not installed")
    from accel_ray.testing import shared_cluster

    return shared_cluster()
