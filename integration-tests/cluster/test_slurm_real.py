"""The multi-CPU sbatch example on a real single-node SLURM (set up by .ci/setup.d/slurm.sh).

Skips when no SLURM controller answers (no `sinfo`, or no idle node).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import WORKERS, clean_env

REPO = Path(__file__).parents[2]
EXAMPLE = REPO / "docs" / "examples" / "slurm" / "multi_cpu.sbatch"


def _slurm_is_up() -> bool:
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return False
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "idle" in out or "mix" in out


pytestmark = pytest.mark.skipif(
    not _slurm_is_up(), reason="needs a running SLURM (slurm-wlm; see .ci/setup.d/slurm.sh)"
)


@pytest.mark.timeout(300)
def test_multi_cpu_sbatch_example_on_real_slurm(tmp_path):
    env = clean_env(tmp_path, SCRIPT=str(WORKERS / "rank_check.py"))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if os.environ.get("SLURM_CONF"):
        env["SLURM_CONF"] = os.environ["SLURM_CONF"]
    output = tmp_path / "job.out"
    submitted = subprocess.run(
        ["sbatch", "--parsable", "--time=5", f"--output={output}", f"--chdir={REPO}", str(EXAMPLE), "2"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 240
    state = ""
    while time.monotonic() < deadline:  # `sbatch --wait` polls slowly: ask every half second
        state = subprocess.run(
            ["scontrol", "-o", "show", "job", job], env=env, capture_output=True, text=True
        ).stdout
        if "JobState=" in state and not any(
            f"JobState={s}" in state for s in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
        ):
            break
        time.sleep(0.5)
    else:
        subprocess.run(["scancel", job], env=env)
        pytest.fail(f"job {job} did not finish in 240 s")
    log = output.read_text() if output.exists() else ""
    assert "JobState=COMPLETED" in state and "ExitCode=0:0" in state, state + log
    assert "launcher slurm" in log
    assert "ok rank=0 world=2 local=0 node=0 sum=3" in log, log
    assert "ok rank=1 world=2 local=1 node=0 sum=3" in log, log
