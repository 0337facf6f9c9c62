"""The issue-20 benchmarks in tools/bench/ run end to end on a tiny size, so they cannot rot.

Figures are not checked (they are the benchmarks' business, never a test's): each run must
finish, print its table and ratios, and exit 0.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tools" / "bench"


def _run(args: list[str], timeout: float) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env.update(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    return done.stdout


def test_step_overhead_measures_and_counts_bytecodes():
    script = str(BENCH / "step_overhead.py")
    table = _run(
        [script, "--scenario", "accum4", "--rounds", "2", "--steps", "8", "--warmup", "1"],
        timeout=240,
    )
    assert re.search(r"^accel\s+\d+\.\d\s+\d+\.\d\s+\d+\.\d{3}x", table, re.M), table
    counted = _run([script, "--scenario", "fp32", "--steps", "8", "--bytecodes"], timeout=240)
    match = re.search(r"bytecodes per step: plain (\d+), accel (\d+)", counted)
    assert match and int(match.group(2)) > int(match.group(1)) > 0, counted
    assert "accel/accelerator.py:accumulate" in counted  # the per-function difference


def test_checkpoint_io_single_process_with_async(tmp_path):
    out = _run(
        [
            str(BENCH / "checkpoint_io.py"),
            "--size-gb",
            "0.01",
            "--repeats",
            "1",
            "--scenarios",
            "single",
            "--variants",
            "torch,safetensors,accel,accel-async",
            "--dir",
            str(tmp_path),
        ],
        timeout=300,
    )
    for variant in ("torch", "safetensors", "accel", "accel-async"):
        assert re.search(rf"^{variant}\s+\d+\.\d{{3}}", out, re.M), out
    assert "durable save / raw floor" in out and "async_save returns after" in out, out
