"""accel-ddp on 2 real gloo processes: parity with one process, accumulation, comm hooks, LocalSGD, join."""

from __future__ import annotations

import pytest


@pytest.mark.timeout(400)
def test_ddp_on_two_processes(run_distributed):
    result = run_distributed("ddp_checks.py", timeout=380)
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


@pytest.mark.timeout(200)
def test_without_accel_ddp_preparing_a_model_names_the_package(run_distributed):
    result = run_distributed("no_ddp_checks.py", timeout=180, env={"ACCEL_DISABLE_PLUGINS": "ddp"})
    assert "ok no_ddp" in result.stdout, result.stdout
