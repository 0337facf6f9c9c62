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
    errors = tmp_path / "saver.err"
    rng = random.Random(7)
    # one process imports torch; each trial is a new process forked from it (workers/saver.py)
    with errors.open("w") as err:
        server = subprocess.Popen(
            [sys.executable, str(WORKER), str(project)],
            env=_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        for trial in range(TRIALS + 1):
            expected = _newest_intact(root)
            server.stdin.write("go\n")
            server.stdin.flush()
            started = server.stdout.readline().split()
            assert started and started[0] == "started", errors.read_text()[-3000:]
            pid = int(started[1])
            try:
                first = server.stdout.readline().split()
                assert first and first[0] == "resumed", errors.read_text()[-3000:]
                resumed = None if first[1] == "None" else Path(first[1])
                assert resumed == expected, (
                    f"trial {trial}: resumed {resumed}, newest intact {expected}"
                )
                if trial == TRIALS:
                    break
                saves = rng.randint(1, 3)
                for _ in range(saves):
                    line = server.stdout.readline()
                    assert line.startswith("saved"), line + errors.read_text()[-3000:]
                time.sleep(rng.uniform(0.0, 0.15))  # somewhere in the next save or its pruning
            finally:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:  # it ended by itself: the check below says how
                    pass
                line = server.stdout.readline()
                while line.startswith("saved"):  # what it wrote before the kill
                    line = server.stdout.readline()
            # ended by our SIGKILL, nothing else
            assert line.split() == ["exited", str(-signal.SIGKILL)], line + errors.read_text()
            for path in root.glob("checkpoint_*"):
                if path.name.split("_")[1].isdigit():
                    assert not manifest.problems(path, require_manifest=True), (
                        f"trial {trial}: {path} is incomplete under its real name: "
                        f"{manifest.problems(path, require_manifest=True)}"
                    )
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert _newest_intact(root) is not None
