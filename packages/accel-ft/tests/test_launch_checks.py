"""``accel launch --ft`` refuses what it cannot run with one line and exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("accel_cli", reason="accel launch comes with accel-cli")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--ft_min_replicas", "3"], "--ft_min_replicas 3 is more than the 2 replica groups"),
        (["--ft_lighthouse", "nowhere"], "give the lighthouse as HOST:PORT"),
        (["--max_restarts", "2"], "use --ft_max_restarts N"),
    ],
    ids=["min-above-groups", "bad-address", "max-restarts"],
)
def test_a_launch_that_cannot_run_says_why_in_one_line(
    tmp_path: Path, flags: list[str], expected: str
) -> None:
    script = tmp_path / "s.py"
    script.write_text("print('should not run')\n")
    env = {**os.environ, "ACCEL_CONFIG_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "accel_cli", "launch", "--ft", *flags, str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and expected in lines[0], result.stderr
    assert "should not run" not in result.stdout
