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

from typing import Any

_CLASSES = {
    "BackendConformance": "backend",
    "PrecisionConformance": "precision",
    "TrackerConformance": "tracker",
    "LauncherConformance": "launcher",
}

_HARDWARE = ("get_backend", "require_cuda", "require_multi_gpu")

__all__ = [*_CLASSES, "run_processes", "WorkerFailure", *_HARDWARE]


def __getattr__(name: str) -> Any:
    """Import the kit classes on first use (they import pytest and torch)."""
    if name in _CLASSES:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_CLASSES[name]}"), name)
    if name in ("run_processes", "WorkerFailure"):
        from . import processes

        return getattr(processes, name)
    if name in _HARDWARE:
        from . import hardware

        return getattr(hardware, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
