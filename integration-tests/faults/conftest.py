"""Fixtures for the fault-tolerance tests: `accel launch` on real processes, with timeouts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ACCEL = Path(sys.executable).with_name("accel")
WORKERS = Path(__file__).parent / "workers"


def launch_env(tmp_path: Path, plugins: str = "ddp", **extra: str) -> dict[str, str]:
    """os.environ without ACCEL_* / torchrun variables, a private config dir, a plugin allow-list."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ACCEL_", "PET_", "TORCHELASTIC_", "TORCH_ELASTIC_"))
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(
        ACCEL_CONFIG_DIR=str(tmp_path / "cfg"),
        ACCEL_PLUGINS=plugins,
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
    )
    env.update(extra)
    return env


class Launch:
    """A running ``accel launch`` in its own session (a timeout kills the whole tree)."""

    def __init__(self, args: list[str], tmp_path: Path, **env: str):
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [str(ACCEL), "launch", *args],
            env=launch_env(tmp_path, **env),
            cwd=str(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def signal(self, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` to the launcher process only."""
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> subprocess.CompletedProcess:
        """Wait for the end; on a timeout kill everything and fail with the output."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            out, err = self.proc.communicate()
            pytest.fail(f"accel launch timed out after {timeout} s\n{out[-4000:]}\n{err[-6000:]}")
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)

    def kill(self) -> None:
        """Kill the whole process tree if it still runs."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.communicate()


@pytest.fixture
def launch(tmp_path):
    """``launch(*args, **env)`` -> :class:`Launch`; whatever still runs is killed at the end."""
    started: list[Launch] = []

    def start(*args: str, **env: str) -> Launch:
        run = Launch([str(a) for a in args], tmp_path, **env)
        started.append(run)
        return run

    yield start
    for run in started:
        run.kill()


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, what: str, proc: Launch | None = None) -> None:
    """Poll ``predicate`` every 0.2 s; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.proc.poll() is not None:
            out, err = proc.proc.communicate()
            pytest.fail(f"accel launch ended before {what}:\n{out[-3000:]}\n{err[-5000:]}")
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture
def faults():
    """Helpers: ``WORKERS``, ``launch_env(...)``, ``wait_for(...)``, ``free_port()``."""
    import types

    return types.SimpleNamespace(
        WORKERS=WORKERS, launch_env=launch_env, wait_for=wait_for, free_port=free_port
    )
