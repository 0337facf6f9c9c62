"""pytest fixtures every accel test suite uses: a clean process state, a clean child environment.

Import them into a ``conftest.py`` to use them (importing a fixture registers it there)::

    from accel.testing.fixtures import clean_accel_state, subprocess_env  # noqa: F401

``clean_accel_state`` is autouse: every test of that folder starts with no ``ACCEL_*``
variable set and no Accelerator/Gradient state left over from the test before.
"""

from __future__ import annotations

import os

import pytest

from accel.state import AcceleratorState, GradientState


def reset_accel_state() -> None:
    """Forget the process-wide Accelerator, process and gradient state."""
    AcceleratorState._reset_state(True)
    GradientState._reset_state()


@pytest.fixture(autouse=True)
def clean_accel_state(monkeypatch):
    """Hide ``ACCEL_*`` variables and reset accel's singletons around each test."""
    for name in list(os.environ):
        if name.startswith(("ACCEL_", "ACCELERATE_")):
            monkeypatch.delenv(name)
    reset_accel_state()
    yield
    reset_accel_state()


@pytest.fixture
def subprocess_env():
    """An environment for child Python processes: no ``ACCEL_*`` / ``ACCELERATE_*`` variables, one thread each."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCEL_", "ACCELERATE_"))}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0")
    return env
