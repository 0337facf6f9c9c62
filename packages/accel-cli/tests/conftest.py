"""Fixtures: run the real ``accel`` executable in a subprocess, isolated from the user's config."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ACCEL = Path(sys.executable).with_name("accel")
DATA = Path(__file__).parent / "data"


def _clean_env(tmp_path: Path, plugins: str | None = "", **extra: str) -> dict[str, str]:
    """os.environ without ACCEL_* / torchrun variables, with a private config dir.

    ``plugins`` restricts the entry-point plugins that load (``ACCEL_PLUGINS``); None loads all.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ACCEL_", "PET_", "TORCHELASTIC_"))
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env["ACCEL_CONFIG_DIR"] = str(tmp_path / "accel-config")
    env["PYTHONUNBUFFERED"] = "1"
    if plugins is not None:
        env["ACCEL_PLUGINS"] = plugins
    env.update(extra)
    return env


def run_accel(
    *args: str,
    tmp_path: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
    plugins: str | None = "",
) -> subprocess.CompletedProcess:
    """``accel *args`` in a subprocess (text output captured)."""
    full_env = _clean_env(tmp_path, plugins)
    full_env.update(env or {})
    return subprocess.run(
        [str(ACCEL), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=full_env,
        cwd=str(cwd or tmp_path),
    )


@pytest.fixture
def accel(tmp_path):
    """``accel(*args, env=..., plugins=...)`` -> CompletedProcess, run in ``tmp_path``."""

    def run(*args: str, **kwargs):
        return run_accel(*args, tmp_path=tmp_path, **kwargs)

    return run


@pytest.fixture
def script(tmp_path):
    """A tiny script printing its arguments and the ACCEL_* variables it got."""
    path = tmp_path / "show.py"
    path.write_text(
        "import json, os, sys\n"
        "print(json.dumps({'argv': sys.argv[1:], 'env': {k: v for k, v in os.environ.items() "
        "if k.startswith('ACCEL_') and k != 'ACCEL_LAUNCH_CONFIG'}, "
        "'config': json.loads(os.environ.get('ACCEL_LAUNCH_CONFIG', '{}'))}))\n"
    )
    return path


@pytest.fixture(name="clean_env")
def clean_env_fixture():
    """The ``clean_env(tmp_path, plugins="", **extra)`` function."""
    return _clean_env


@pytest.fixture
def without_transformers(tmp_path, monkeypatch):
    """Child interpreters cannot import transformers: estimate-memory uses accel's own builders.

    Their figures are the seed table's; with transformers installed the CLI builds the model
    through transformers instead (another largest layer for BERT, the rotary buffers counted).
    """
    site = tmp_path / "no-transformers"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['transformers'] = None\n")
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{path}" if path else str(site))
