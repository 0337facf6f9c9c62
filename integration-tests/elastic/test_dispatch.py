"""gather_for_metrics gives each sample once on every loader path (1 and 2 real processes), and
a dispatched loader (iterable stream, shuffled map-style) resumes on another number of processes
in the same global order."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(600)
PATHS = [
    "dispatched",
    "dispatched_split",
    "sharded_stream",
    "sharded",
    "not_even",
    "dispatched_map",
]


@pytest.mark.parametrize("nproc", [1, 2])
def test_gather_for_metrics_returns_every_sample_once(run_distributed, tmp_path, nproc):
    run_distributed("dispatch_checks.py", str(tmp_path), "metrics", nproc=nproc)
    result = json.loads((tmp_path / f"metrics-{nproc}.json").read_text())
    for path in PATHS:
        assert sorted(result[path]) == list(range(66)), path


@pytest.mark.parametrize("saved_on, resumed_on", [(2, 1), (1, 2)])
def test_a_dispatched_position_continues_on_another_size(
    run_distributed, tmp_path, saved_on, resumed_on
):
    run_distributed("dispatch_checks.py", str(tmp_path), "save", nproc=saved_on)
    run_distributed("dispatch_checks.py", str(tmp_path), "resume", nproc=resumed_on)
    before = json.loads((tmp_path / f"save-{saved_on}.json").read_text())
    after = json.loads((tmp_path / f"resume-{resumed_on}.json").read_text())
    assert before["stream"] + after["stream"] == list(range(96))
    assert sorted(before["shuffled"] + after["shuffled"]) == list(range(96))
    assert len(before["shuffled"]) == 3 * 4 * saved_on
