"""Fault tolerance: preemption checkpoints and hang reports (see docs/fault-tolerance.md).

* :mod:`accel.faults.preemption`: SIGTERM -> every rank finishes its step, saves, exits 75
  (:class:`PreemptionKwargs`, :func:`preemption_point`).
* :mod:`accel.faults.flight`: each worker's last collectives in a per-rank file
  (``ACCEL_FLIGHT_DIR``, set by ``accel launch``).
* :mod:`accel.faults.report`: the launcher's hang report built from those files.

Importing this package imports neither torch nor its submodules.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    "PreemptionKwargs": "preemption",
    "PREEMPTED_EXIT_CODE": "preemption",
    "KILLED_EXIT_CODE": "preemption",
    "preemption_point": "preemption",
    "hang_report": "report",
}


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted(_NAMES)
