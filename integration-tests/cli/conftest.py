"""Fixtures for CLI integration tests: the real `accel` executable, real processes, timeouts."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ACCEL = Path(sys.executable).with_name("accel")
SCRIPTS = Path(__file__).parent / "scripts"
SEED = Path(__file__).parents[2] / "packages" / "accel-cli" / "tests" / "data"


def accel_env(tmp_path: Path, plugins: str | None = "", **extra: str) -> dict[str, str]:
    """os.environ without ACCEL_* / torchrun variables; a private config dir; plugin allow-list."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ACCEL_", "PET_", "TORCHELASTIC_"))
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(ACCEL_CONFIG_DIR=str(tmp_path / "cfg"), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    if plugins is not None:
        env["ACCEL_PLUGINS"] = plugins
    env.update(extra)
    return env


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def run_accel(tmp_path):
    """``run_accel(*args, timeout=..., plugins=..., env=...)`` -> CompletedProcess."""

    def run(*args: str, timeout: float = 240, plugins: str | None = "", env=None):
        full = accel_env(tmp_path, plugins, **(env or {}))
        return subprocess.run(
            [str(ACCEL), *args], capture_output=True, text=True, timeout=timeout, env=full,
            stdin=subprocess.DEVNULL,
            cwd=str(tmp_path),
        )  # fmt: skip

    return run


@pytest.fixture
def cli():
    """Helpers: ``cli.ACCEL``, ``cli.SCRIPTS``, ``cli.SEED``, ``cli.accel_env(...)``, ``cli.free_port()``."""
    import types

    return types.SimpleNamespace(
        ACCEL=ACCEL, SCRIPTS=SCRIPTS, SEED=SEED, accel_env=accel_env, free_port=free_port
    )
