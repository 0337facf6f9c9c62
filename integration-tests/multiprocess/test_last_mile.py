"""Issue 29 on 2 real gloo processes: per-rank checkpoint directories, debug-mode padding (one launch)."""

from __future__ import annotations

import pytest

CHECKS = ("per_rank_dirs", "pad_debug", "reseeded_generator")


@pytest.mark.timeout(150)
def test_last_mile_on_two_processes(run_distributed, tmp_path):
    result = run_distributed(
        "last_mile_checks.py",
        *CHECKS,
        timeout=140,
        env={"LAST_MILE_TMP": str(tmp_path), "ACCELERATE_DEBUG_MODE": "1"},
    )
    for name in CHECKS:
        assert f"ok {name}" in result.stdout, result.stdout + result.stderr[-3000:]
