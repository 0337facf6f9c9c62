"""Shared fixtures of accel-fp8's tests: a clean accel state around every test."""

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
