"""The third-party all-reduce backend passes accel's backend conformance kit."""

from __future__ import annotations

from accel.testing import BackendConformance


class TestAllReduceBackendConformance(BackendConformance):
    """Selected by ``ACCEL_BACKEND=allreduce`` on 1 and 2 processes."""

    backend_name = "allreduce"
    env = {"ACCEL_BACKEND": "allreduce"}
