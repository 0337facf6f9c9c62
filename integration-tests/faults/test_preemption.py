"""Preemption on real processes: SIGTERM -> every rank finishes its step, saves, exits 75;
the relaunch resumes and ends bit-identical to an uninterrupted run; a second SIGTERM or an
expired grace period exits at once with 143."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

TRAIN = Path(__file__).parent / "workers" / "train.py"
STEPS = 3 * 96 // 8  # epochs x samples / (batch 4 x 2 ranks)
pytestmark = pytest.mark.timeout(600)


def _steps(project, rank=0) -> int:
    path = project / f"progress-rank{rank}"
    return len(path.read_text().split()) if path.exists() else 0


def test_sigterm_to_the_launcher_saves_and_the_relaunch_resumes_exactly(launch, faults, tmp_path):
    ref, project = tmp_path / "reference", tmp_path / "preempted"
    ref.mkdir()
    project.mkdir()
    reference = launch("--cpu", "--num_processes", "2", TRAIN, ref)
    args = ["--cpu", "--num_processes", "2", "--preemption", TRAIN, project]
    run = launch(*args, "--step-sleep", "0.3")
    faults.wait_for(lambda: _steps(project) >= 4, 240, "4 training steps", run)
    run.signal(signal.SIGTERM)
    result = run.wait(timeout=90)
    assert result.returncode == 75, result.stderr[-4000:]
    assert "accel launch: preempted: every worker saved a checkpoint and exited with 75" in (
        result.stderr
    )
    assert (project / "checkpoints" / "checkpoint_0").is_dir()
    assert not (project / "final.pt").exists()
    stopped = {_steps(project, 0), _steps(project, 1)}
    assert len(stopped) == 1 and 4 <= stopped.pop() < STEPS  # both ranks stopped at one step

    resumed = launch(*args).wait(timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "resumed at epoch" in resumed.stdout
    assert _steps(project) == STEPS
    finished = reference.wait(timeout=300)
    assert finished.returncode == 0, finished.stderr[-4000:]
    want, got = torch.load(ref / "final.pt"), torch.load(project / "final.pt")
    assert want.keys() == got.keys()
    assert all(torch.equal(want[k], got[k]) for k in want)


def test_sigterm_to_the_workers_saves_too(launch, faults, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    run = launch(
        "--cpu", "--num_processes", "2", "--preemption", TRAIN, project, "--step-sleep", "0.3"
    )
    faults.wait_for(lambda: _steps(project) >= 2, 240, "2 training steps", run)
    workers = [
        p for p in psutil.Process(run.proc.pid).children(recursive=True)
        if "accel.launchers.worker" in " ".join(p.cmdline())
        and "torch.distributed.run" not in " ".join(p.cmdline())
    ]  # fmt: skip
    assert len(workers) == 2
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    result = run.wait(timeout=90)
    assert result.returncode == 75, result.stderr[-4000:]
    assert (project / "checkpoints" / "checkpoint_0").is_dir()


def test_a_second_sigterm_exits_at_once(launch, faults, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    run = launch(
        "--cpu", "--num_processes", "2", "--preemption_grace_period", "120",
        TRAIN, project, "--step-sleep", "300",
    )  # fmt: skip
    faults.wait_for(lambda: _steps(project) >= 1, 240, "the first step", run)
    tree = psutil.Process(run.proc.pid).children(recursive=True)
    run.signal(signal.SIGTERM)
    time.sleep(2)
    start = time.monotonic()
    run.signal(signal.SIGTERM)
    result = run.wait(timeout=60)
    assert time.monotonic() - start < 15
    assert result.returncode == 143, result.stderr[-4000:]
    assert not (project / "checkpoints").exists()
    time.sleep(2)
    assert not [p.pid for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_the_grace_period_running_out_exits(launch, faults, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    run = launch(
        "--cpu", "--num_processes", "2", "--preemption_grace_period", "3",
        TRAIN, project, "--step-sleep", "300",
    )  # fmt: skip
    faults.wait_for(lambda: _steps(project) >= 1, 240, "the first step", run)
    start = time.monotonic()
    run.signal(signal.SIGTERM)
    result = run.wait(timeout=60)
    assert time.monotonic() - start < 3 + 20
    assert result.returncode == 143, result.stderr[-4000:]
    assert "the grace period of 3 s ran out before the preemption checkpoint" in result.stderr
    assert not (project / "checkpoints").exists()


def test_one_process_without_launcher(faults, tmp_path):
    """A single process (``python train.py``): SIGTERM, no collective, exit 75 and a checkpoint."""
    project = tmp_path / "p"
    project.mkdir()
    env = faults.launch_env(tmp_path, ACCEL_PREEMPTION="1")
    proc = subprocess.Popen(
        [sys.executable, str(TRAIN), str(project), "--step-sleep", "0.2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while _steps(project) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 75, err[-3000:]
    assert "every rank stopped after optimizer step" in err
    assert (project / "checkpoints" / "checkpoint_0").is_dir()


@pytest.mark.skipif(
    __import__("shutil").which(os.environ.get("CXX", "c++")) is None,
    reason="DeepSpeed JIT-builds its CPU ops with a C++ compiler: apt-get install g++",
)
def test_sigterm_under_deepspeed_saves_and_exits_75(launch, faults, tmp_path):
    """DeepSpeed's optimizer wrapper steps inside the engine: it must still mark the step."""
    project = tmp_path / "p"
    project.mkdir()
    extensions = os.environ.get(
        "TORCH_EXTENSIONS_DIR",
        str(Path(__file__).resolve().parents[2] / ".cache" / "torch_extensions"),
    )
    run = launch(
        "--cpu", "--num_processes", "2", "--use_deepspeed", "--zero_stage", "2", "--preemption",
        TRAIN, project, "--step-sleep", "0.3",
        plugins="ddp,deepspeed", DS_ACCELERATOR="cpu", TORCH_EXTENSIONS_DIR=extensions,
    )  # fmt: skip
    faults.wait_for(lambda: _steps(project) >= 2, 400, "2 training steps", run)
    run.signal(signal.SIGTERM)
    result = run.wait(timeout=120)
    assert result.returncode == 75, result.stderr[-4000:]
    assert (project / "checkpoints" / "checkpoint_0").is_dir()
    stopped = {_steps(project, 0), _steps(project, 1)}
    assert len(stopped) == 1 and stopped.pop() < STEPS
