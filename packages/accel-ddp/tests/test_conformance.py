"""accel-ddp passes the backend conformance kit: 1 and 2 real gloo processes, resume in new ones."""

from __future__ import annotations

from accel.testing import BackendConformance


class TestDDPBackendConformance(BackendConformance):
    """Two processes under torchrun select DDP from ``MULTI_CPU``.

    On one process core's single-process backend runs (its own conformance test covers it),
    so only the 2-process checks run here.
    """

    backend_name = "ddp"
    world_sizes = (2,)
