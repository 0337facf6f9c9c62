"""Auto-resume on real processes: a random worker SIGKILLed at a random time, restarted by
`accel launch --max_restarts`, resumes by itself (`accelerator.resume()`) and ends with weights
bit-identical to the uninterrupted run's."""

from __future__ import annotations

import os
import random
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest
import torch

WORKER = Path(__file__).parent / "workers" / "autoresume.py"
TRIALS = 3
LANES = 2
PACE = "0.05"
pytestmark = pytest.mark.timeout(1500)


def _workers(launcher_pid: int) -> list[psutil.Process]:
    """The training processes under ``accel launch`` (leaves running the worker script)."""
    try:
        tree = psutil.Process(launcher_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for proc in tree:
        try:
            if str(WORKER) in " ".join(proc.cmdline()) and not proc.children():
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


def _checkpoints(out: Path) -> list[Path]:
    """The complete checkpoints (a ``checkpoint_N.accel-tmp`` being written does not count:
    a kill before the first one is complete would leave nothing to resume from)."""
    folder = out / "project" / "checkpoints"
    return sorted(p for p in folder.glob("checkpoint_*") if re.fullmatch(r"checkpoint_\d+", p.name))


def _run(launch, out: Path, kill_after: float | None, rng: random.Random):
    out.mkdir()
    run = launch(
        "--cpu", "--num_processes", "2", "--max_restarts", "3", "--monitor_interval", "0.2",
        WORKER, out, PACE,
    )  # fmt: skip
    killed = None
    if kill_after is not None:
        deadline = time.monotonic() + 120
        while not _checkpoints(out) and time.monotonic() < deadline and run.proc.poll() is None:
            time.sleep(0.05)
        time.sleep(kill_after)
        workers = _workers(run.proc.pid)
        if workers:
            victim = rng.choice(workers)
            killed = victim.pid
            os.kill(victim.pid, signal.SIGKILL)
    return run.wait(timeout=300), killed


def test_sigkill_of_a_random_worker_resumes_to_identical_weights(launch, tmp_path):
    rng = random.Random(1234)
    kills = [(round(rng.uniform(0.0, 0.8), 2), random.Random(rng.random())) for _ in range(TRIALS)]
    # two runs at a time: one's single-process phases (the agent starting, workers exiting,
    # the pace between steps) leave a core free for the other
    with ThreadPoolExecutor(max_workers=LANES) as pool:
        reference_run = pool.submit(_run, launch, tmp_path / "reference", None, random.Random(0))
        trials = [
            pool.submit(_run, launch, tmp_path / f"trial{trial}", kill_after, victim_rng)
            for trial, (kill_after, victim_rng) in enumerate(kills)
        ]
        reference, _ = reference_run.result()
        results = [trial.result() for trial in trials]
    assert reference.returncode == 0, reference.stderr[-4000:]
    expected = torch.load(tmp_path / "reference" / "final.pt", weights_only=True)
    for trial, (result, killed) in enumerate(results):
        out = tmp_path / f"trial{trial}"
        context = f"trial {trial} (killed pid {killed})\n{result.stderr[-5000:]}"
        assert killed is not None, "the run ended before a worker could be killed\n" + context
        assert result.returncode == 0, context
        assert list(out.glob("started-rank*-restart1")), (
            "the workers were not restarted\n" + context
        )
        assert "resumed from" in result.stderr, context
        final = torch.load(out / "final.pt", weights_only=True)
        assert final.keys() == expected.keys()
        for name, tensor in expected.items():
            assert torch.equal(final[name], tensor), f"{name} differs\n{context}"
