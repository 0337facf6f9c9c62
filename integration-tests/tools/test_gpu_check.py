"""tools/gpu_check.py --dry-run on the CPU: every check builds (imports, plugin objects, models,
checkpoints, ``accel launch --dry_run``) so that the GPU check cannot rot between GPU runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "gpu_check.py"
LINE = re.compile(r"^(PASS|FAIL|SKIP) (\S+) (\d+\.\d) ?(.*)$")


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env.update(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )


def _results(stdout: str) -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    for line in stdout.splitlines():
        match = LINE.match(line)
        if match:
            assert match.group(2) not in found, f"two lines for {match.group(2)}"
            found[match.group(2)] = (match.group(1), match.group(4))
    return found


def _names() -> list[str]:
    listed = _run([str(SCRIPT), "--list"], timeout=60)
    assert listed.returncode == 0, listed.stderr[-2000:]
    return [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]


@pytest.mark.timeout(660)
def test_dry_run_builds_every_check():
    names = _names()
    for expected in ("bf16_train", "fp16_grad_scaler", "ddp_nccl_1proc", "fsdp2_cpu_offload"):
        assert expected in names
    done = _run([str(SCRIPT), "--dry-run"], timeout=600)
    assert done.returncode == 0, (
        f"exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-3000:]}"
    )
    results = _results(done.stdout)
    assert set(results) == {*names, "step_time"}, sorted(results)
    failed = {name: reason for name, (status, reason) in results.items() if status != "PASS"}
    assert not failed, failed
    assert all(
        reason.startswith("dry run: built")
        for name, (_, reason) in results.items()
        if name != "step_time"
    )
    assert "0 failure(s)" in done.stdout


@pytest.mark.timeout(300)
def test_a_check_that_cannot_build_fails_the_dry_run():
    program = (
        "import sys; sys.path.insert(0, 'tools'); import gpu_check as g\n"
        "def broken(ctx):\n"
        "    import accel_no_such_plugin  # noqa\n"
        "def skipped(ctx):\n"
        "    raise g.Skip('not on this machine')\n"
        "g.CHECKS += [g.Check('broken', broken), g.Check('skipped', skipped)]\n"
        "sys.argv = ['gpu_check.py', '--dry-run', '--no-step-time', '--only', 'broken,skipped,bf16_train']\n"
        "sys.exit(g.main())\n"
    )
    done = _run(["-c", program], timeout=240)
    results = _results(done.stdout)
    assert done.returncode == 1, done.stdout[-3000:]
    assert results["broken"][0] == "FAIL" and "accel_no_such_plugin" in results["broken"][1]
    assert results["skipped"] == ("SKIP", "not on this machine")
    assert results["bf16_train"][0] == "PASS"
    assert "1 failure(s)" in done.stdout
