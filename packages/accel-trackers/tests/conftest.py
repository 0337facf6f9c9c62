"""Fixtures of accel-trackers' tests: a clean accel state and an isolated, offline tracker environment."""

from __future__ import annotations

import os

import pytest
from accel.state import AcceleratorState, GradientState

USER_SETUP_PREFIXES = (
    "ACCEL_",
    "WANDB_",
    "COMET_",
    "CLEARML_",
    "TRAINS_",
    "MLFLOW_",
    "DVC_",
    "AIM_",
)
"""Environment variables that could point a tracker at a server: hidden from the tests."""


@pytest.fixture(autouse=True)
def _clean_accel(monkeypatch):
    """Reset accel's singletons; hide ``ACCEL_*`` and tracker variables around each test."""
    for name in list(os.environ):
        if name.startswith(USER_SETUP_PREFIXES) or name == "NETRC":
            monkeypatch.delenv(name)
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    yield
    AcceleratorState._reset_state(True)
    GradientState._reset_state()


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A fresh working directory and ``HOME`` (so nothing the user configured applies)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.chdir(run)
    return run
