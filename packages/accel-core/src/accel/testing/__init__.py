"""``accel.testing``: a conformance kit that a plugin's own pytest suite runs against its classes.

Subclass a kit class in a test module of your plugin (name the subclass ``Test...`` so pytest
collects it) and set its class attributes::

    from accel.testing import BackendConformance

    class TestMyBackend(BackendConformance):
        backend_name = "mine"
        env = {"ACCEL_BACKEND": "mine"}

- :class:`BackendConformance`: trains on 1 and 2 real processes (gloo, CPU), matches plain
  PyTorch, and round-trips ``save_state``/``load_state`` in new processes.
- :class:`PrecisionConformance`: the compute dtype is the one claimed, backward and the
  optimizer step work, the state dict round-trips.
- :class:`TrackerConformance`: scalars and config are logged, ``end_training`` ends the run,
  only the main process creates one.
- :class:`LauncherConformance`: the launch plan really starts the processes it says.

Only accel's public API is used, so a check that passes here passes for any plugin. The kit
needs pytest (a test dependency); :mod:`accel.testing.reference` and
:mod:`accel.testing.processes` do not. See docs/conformance.md.

:mod:`accel.testing.hardware` (``get_backend``, ``require_cuda``, ``require_multi_gpu``) skips
tests on missing devices; Accelerate's path for it, ``accel.test_utils``, re-exports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports

if TYPE_CHECKING:  # what editors see; at run time each name loads on first use (the kit
    # classes import pytest and torch)
    from accel.testing.backend import BackendConformance as BackendConformance
    from accel.testing.hardware import get_backend as get_backend
    from accel.testing.hardware import require_cuda as require_cuda
    from accel.testing.hardware import require_multi_gpu as require_multi_gpu
    from accel.testing.launcher import LauncherConformance as LauncherConformance
    from accel.testing.precision import PrecisionConformance as PrecisionConformance
    from accel.testing.processes import WorkerFailure as WorkerFailure
    from accel.testing.processes import run_processes as run_processes
    from accel.testing.tracker import TrackerConformance as TrackerConformance

_NAMES = {
    "BackendConformance": "accel.testing.backend",
    "PrecisionConformance": "accel.testing.precision",
    "TrackerConformance": "accel.testing.tracker",
    "LauncherConformance": "accel.testing.launcher",
    "run_processes": "accel.testing.processes",
    "WorkerFailure": "accel.testing.processes",
    "get_backend": "accel.testing.hardware",
    "require_cuda": "accel.testing.hardware",
    "require_multi_gpu": "accel.testing.hardware",
}

__all__ = list(_NAMES)

__getattr__, __dir__ = exports(__name__, _NAMES)
