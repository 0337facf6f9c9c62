"""Fault tolerance: preemption checkpoints and hang reports (see docs/fault-tolerance.md).

* :mod:`accel.faults.preemption`: SIGTERM -> every rank finishes its step, saves, exits 75
  (:class:`PreemptionKwargs`, :func:`preemption_point`).
* :mod:`accel.faults.flight`: each worker's last collectives in a per-rank file
  (``ACCEL_FLIGHT_DIR``, set by ``accel launch``).
* :mod:`accel.faults.report`: the launcher's hang report built from those files.

Importing this package imports neither torch nor its submodules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports

if TYPE_CHECKING:  # what editors see; at run time each name loads on first use
    from accel.faults.preemption import KILLED_EXIT_CODE as KILLED_EXIT_CODE
    from accel.faults.preemption import PREEMPTED_EXIT_CODE as PREEMPTED_EXIT_CODE
    from accel.faults.preemption import PreemptionKwargs as PreemptionKwargs
    from accel.faults.preemption import preemption_point as preemption_point
    from accel.faults.report import hang_report as hang_report

_NAMES = {
    "PreemptionKwargs": "accel.faults.preemption",
    "PREEMPTED_EXIT_CODE": "accel.faults.preemption",
    "KILLED_EXIT_CODE": "accel.faults.preemption",
    "preemption_point": "accel.faults.preemption",
    "hang_report": "accel.faults.report",
}

__all__ = sorted(_NAMES)

__getattr__, __dir__ = exports(__name__, _NAMES)
