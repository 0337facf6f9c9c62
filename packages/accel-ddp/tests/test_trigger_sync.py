"""trigger_sync_in_backward on 2 real gloo processes: earlier backwards' gradients are synced (issue 19)."""

from __future__ import annotations

from pathlib import Path

import pytest
from accel.testing import run_processes

WORKERS = Path(__file__).parent / "workers"
CHECKS = ("default", "bucket_view", "find_unused", "control")


@pytest.mark.timeout(300)
def test_trigger_sync_in_backward_matches_one_process_on_the_whole_batch():
    result = run_processes(WORKERS / "trigger_sync_checks.py", CHECKS, timeout=280)
    for name in CHECKS:
        assert f"ok {name}" in result.stdout, result.stdout + result.stderr[-3000:]
