"""accelerator.profile() on 2 real processes: every rank writes its own valid Chrome trace."""

from __future__ import annotations

import json

import pytest


@pytest.mark.timeout(300)
def test_each_rank_writes_a_valid_trace(run_distributed, tmp_path):
    result = run_distributed("profile_worker.py", str(tmp_path), timeout=280)
    assert "ok profile" in result.stdout, result.stdout

    traces = sorted(p.name for p in (tmp_path / "trace").iterdir())
    assert traces == ["profile_0.json", "profile_1.json"]
    for rank in (0, 1):
        trace = json.loads((tmp_path / "trace" / f"profile_{rank}.json").read_text())
        names = {event.get("name") for event in trace["traceEvents"]}
        assert f"train_step_rank{rank}" in names, sorted(n for n in names if n)[:40]
        assert f"train_step_rank{1 - rank}" not in names
        assert "aten::addmm" in names
        info = trace.get("distributedInfo")
        if info is not None:  # kineto records the process group when one exists
            assert int(info["rank"]) == rank and int(info["world_size"]) == 2

    scheduled = sorted(p.name for p in (tmp_path / "scheduled").iterdir())
    assert scheduled == [
        "profile_0_step3.json",
        "profile_0_step6.json",
        "profile_1_step3.json",
        "profile_1_step6.json",
    ]
    for name in scheduled:
        assert json.loads((tmp_path / "scheduled" / name).read_text())["traceEvents"]
