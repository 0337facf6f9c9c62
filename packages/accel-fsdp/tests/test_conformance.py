"""accel-fsdp passes the backend conformance kit: FSDP2 on 1 and 2 real gloo processes, sharded resume."""

from __future__ import annotations

from accel.testing import BackendConformance


class TestFSDPBackendConformance(BackendConformance):
    """Selected the way `accel launch` selects it: ``ACCEL_DISTRIBUTED_TYPE=FSDP`` (defaults: FSDP2, full shard)."""

    backend_name = "fsdp"
    env = {"ACCEL_DISTRIBUTED_TYPE": "FSDP"}
