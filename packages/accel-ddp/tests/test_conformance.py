"""accel-ddp passes the backend conformance kit: 1 and 2 real gloo processes, resume in new ones."""

from __future__ import annotations

from accel.testing import BackendConformance


class TestDDPBackendConformance(BackendConformance):
    """Two processes under torchrun select DDP from ``MULTI_CPU``; one process is core's backend."""

    backend_name = "ddp"
    one_process_backend_name = "single_process"
