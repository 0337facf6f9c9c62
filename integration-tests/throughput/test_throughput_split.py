"""The same work reports the same tokens/s, FLOPs and MFU whatever its split, and `accel launch` sums it up.

One `accel launch` of 2 CPU processes (gloo) runs three splits of the same 4 optimizer
steps (micro-batch x accumulation x processes: 2x2x2, 4x1x2 as 2 micro-batches, 4x1x2);
this process runs the 1-process splits 4x2x1 and 8x1x1 with the same code
(``workers/split_worker.py``). A clock that advances one second per optimizer step makes
the rates exact: each is the step's count of the whole run, so a count divided by the
accumulation or by the processes (mosaicml/composer#271) or refused under accumulation
(Lightning-AI/pytorch-lightning#19461) would show. MFU differs by the devices only: the
same FLOP/s over twice the peak.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).parent / "workers" / "split_worker.py"
ACCEL = Path(sys.executable).with_name("accel")


def _worker():
    spec = importlib.util.spec_from_file_location("split_worker", WORKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _launch(tmp_path: Path, flops_per_sample: float) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ACCEL_", "ACCELERATE_", "PET_", "TORCHELASTIC_"))
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(ACCEL_CONFIG_DIR=str(tmp_path / "cfg"), ACCEL_PLUGINS="ddp", OMP_NUM_THREADS="1")
    command = [str(ACCEL), "launch", "--cpu", "--num_processes", "2", str(WORKER), str(tmp_path)]
    proc = subprocess.Popen(
        [*command, repr(flops_per_sample)], env=env, cwd=tmp_path, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"accel launch timed out\n{out[-3000:]}\n{err[-3000:]}")
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _figures(variant: dict) -> list[tuple]:
    keys = ("samples_per_second", "tokens_per_second", "steps_per_second", "flops_per_step")
    return [tuple(r.get(f"throughput/{k}") for k in keys) for r in variant["reports"]]


def test_every_split_reports_the_same_figures_and_launch_prints_the_run(tmp_path):
    worker = _worker()
    local = [worker.run_variant(4, 2), worker.run_variant(8, 1)]
    flops_per_sample = local[0]["flops_per_sample"]
    assert local[1]["flops_per_sample"] == flops_per_sample > 0
    result = _launch(tmp_path, flops_per_sample)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    launched = json.loads((tmp_path / "variants.json").read_text())

    tokens = worker.real_tokens_per_step(range(1, 4))  # step 0 is warm-up
    expected = [(None,) * 4] + [(8.0, float(t), 1.0, 8 * flops_per_sample) for t in tokens]
    for variant in local + launched:
        assert _figures(variant) == expected, variant["split"]
        processes = variant["split"][3]
        mfu = [r.get("throughput/mfu") for r in variant["reports"][1:]]
        assert mfu == [pytest.approx(8 * flops_per_sample / (processes * worker.PEAK))] * 3
        # what the tracker got (on the main process) is what the loop read
        assert [values for _, values in variant["logged"]] == variant["reports"][1:]
        assert [step for step, _ in variant["logged"]] == [2, 3, 4]
    for variant in launched:
        reports = variant["reports"][1:]
        per_process = [r["throughput/process_samples_per_second"] for r in reports]
        assert per_process == [4.0] * 3, variant["split"]  # rank 0's half of each step

    # the launcher's line, summed from both workers' records of the last split
    line = f"accel launch: throughput: 4 optimizer steps, 8.0 samples/s, {sum(tokens) / 3:.1f} tokens/s"
    mfu = 8 * flops_per_sample / (2 * worker.PEAK)
    assert f"{line}, MFU {mfu * 100:.3g}%" in result.stderr.splitlines(), result.stderr[-3000:]
