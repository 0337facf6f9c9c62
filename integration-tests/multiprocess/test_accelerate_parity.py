"""Issue 19 on 2 real gloo processes: Accelerate's collectives, sharding and decorators behave the same."""

from __future__ import annotations

import pytest

CHECKS = (
    "gather_grad",
    "reduce",
    "uneven",
    "batch_sampler",
    "sharding",
    "local_process",
    "save_state_dirs",
)


@pytest.mark.timeout(300)
def test_accelerate_parity_on_two_processes(run_distributed, tmp_path):
    result = run_distributed(
        "parity_checks.py", *CHECKS, timeout=280, env={"PARITY_TMP": str(tmp_path)}
    )
    for name in CHECKS:
        assert f"ok {name}" in result.stdout, result.stdout + result.stderr[-3000:]
