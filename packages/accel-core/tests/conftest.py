"""Shared fixtures of accel-core's tests: a clean accel state around every test."""

from __future__ import annotations

import os

import pytest
from accel.state import AcceleratorState, GradientState


@pytest.fixture(autouse=True)
def _clean_accel(monkeypatch):
    """Reset the process-wide singletons and hide ``ACCEL_*`` variables around each test."""
    for name in list(os.environ):
        if name.startswith("ACCEL_"):
            monkeypatch.delenv(name)
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    yield
    AcceleratorState._reset_state(True)
    GradientState._reset_state()


@pytest.fixture
def subprocess_env():
    """An environment for child Python processes: no ``ACCEL_*`` variables, one thread."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0")
    return env
