"""Fixtures of accel-trackers' tests: a clean accel state and an isolated, offline tracker environment."""

from __future__ import annotations

import os

import pytest
from accel.testing.fixtures import clean_accel_state  # noqa: F401

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
def _hide_tracker_setup(monkeypatch, clean_accel_state):  # noqa: F811 (the shared fixture, first)
    """Also hide the tracker variables that could point a run at a server."""
    for name in list(os.environ):
        if name.startswith(USER_SETUP_PREFIXES) or name == "NETRC":
            monkeypatch.delenv(name)


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
