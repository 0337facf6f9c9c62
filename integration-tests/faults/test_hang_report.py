"""Hang reports on 2 real processes (gloo): rank 1 skips a gather, skips wait_for_everyone, or
raises before a collective; the job ends within the process-group timeout + 10 s and
`accel launch` prints one block naming the collective and rank 1."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

HANG = Path(__file__).parent / "workers" / "hang.py"
TIMEOUT = 5
pytestmark = pytest.mark.timeout(400)


@pytest.mark.parametrize(
    "mode, op, rank1",
    [
        ("skip_gather", "gather #3", "entered wait_for_everyone #3 instead"),
        (
            "skip_barrier",
            "wait_for_everyone #3",
            "its last collective was wait_for_everyone #2",
        ),
        ("raise", "gather #3", "; it raised RuntimeError: rank 1 failed before the gather"),
    ],
)
def test_the_report_names_rank_1_and_the_collective(launch, tmp_path, mode, op, rank1):
    out = tmp_path / "out"
    out.mkdir()
    result = launch(
        "--cpu", "--num_processes", "2", HANG, mode, str(TIMEOUT), out, plugins=""
    ).wait(timeout=300)  # fmt: skip
    ended = time.time()
    assert result.returncode != 0
    err = result.stderr
    assert "accel launch: hang in collective" in err, err[-3000:]
    block = err[err.index("accel launch: hang in collective") :]
    print(block)
    assert block.startswith(f"accel launch: hang in collective {op} (called at ")
    assert "hang.py:" in block.splitlines()[0]
    assert "  rank 0: entered it; waited " in block
    line = next(x for x in block.splitlines() if x.startswith("  rank 1: "))
    assert line.startswith("  rank 1: NEVER ENTERED it: ") and rank1 in line, line
    assert "  entered: rank 0; never entered: rank 1" in block
    assert f"(process-group timeout {TIMEOUT} s)" in block
    assert "failed first" not in block  # one block, not the plain failure line as well
    broke = min(float(p.read_text()) for p in out.glob("broken-rank*"))
    assert ended - broke < TIMEOUT + 10, f"the job took {ended - broke:.1f} s after the break"
