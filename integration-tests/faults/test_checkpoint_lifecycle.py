"""A crash-proof checkpoint lifecycle: a process SIGKILLed at random points while saving and
pruning (total_limit) never leaves an incomplete checkpoint under a real name, and the next
start resumes from the newest intact checkpoint."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from accel.checkpoint import manifest

WORKER = Path(__file__).parent / "workers" / "saver.py"
TRIALS = 12
pytestmark = pytest.mark.timeout(900)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", ACCEL_PLUGINS="")
    return env


def _newest_intact(root: Path) -> Path | None:
    found = sorted(
        (int(p.name.split("_")[1]), p)
        for p in root.glob("checkpoint_*")
        if p.name.split("_")[1].isdigit() and not manifest.problems(p)
    )
    return found[-1][1] if found else None


def test_kills_during_save_and_pruning_always_resume_from_the_newest_intact(tmp_path):
    project = tmp_path / "project"
    root = project / "checkpoints"
    rng = random.Random(7)
    for trial in range(TRIALS + 1):
        expected = _newest_intact(root)
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(project)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            first = proc.stdout.readline().split()
            assert first and first[0] == "resumed", proc.stderr.read()[-3000:]
            resumed = None if first[1] == "None" else Path(first[1])
            assert resumed == expected, (
                f"trial {trial}: resumed {resumed}, newest intact {expected}"
            )
            if trial == TRIALS:
                break
            saves = rng.randint(1, 3)
            for _ in range(saves):
                line = proc.stdout.readline()
                assert line.startswith("saved"), line + proc.stderr.read()[-3000:]
            time.sleep(rng.uniform(0.0, 0.15))  # somewhere in the next save or its pruning
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=60)
        for path in root.glob("checkpoint_*"):
            if path.name.split("_")[1].isdigit():
                assert not manifest.problems(path, require_manifest=True), (
                    f"trial {trial}: {path} is incomplete under its real name: "
                    f"{manifest.problems(path, require_manifest=True)}"
                )
    assert _newest_intact(root) is not None
