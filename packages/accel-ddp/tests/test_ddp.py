"""accel-ddp on 2 real gloo processes: parity with one process, accumulation, comm hooks, LocalSGD, join."""

from __future__ import annotations

from pathlib import Path

import pytest
from accel.testing import run_processes

WORKERS = Path(__file__).parent / "workers"


@pytest.mark.timeout(400)
def test_ddp_on_two_processes():
    result = run_processes(WORKERS / "ddp_checks.py", timeout=380)
    for name in (
        "parity",
        "accumulation",
        "comm_hooks",
        "local_sgd",
        "join",
        "resume",
        "async_resume",
        "providers",
    ):
        assert f"ok {name}" in result.stdout, result.stdout
