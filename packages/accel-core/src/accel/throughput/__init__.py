"""Throughput and model-FLOPs utilisation (MFU) of a training run.

- :mod:`~accel.throughput.monitor`: :class:`ThroughputMonitor` (``accelerator.throughput``)
  and its settings, :class:`ThroughputKwargs`;
- :mod:`~accel.throughput.flops`: :func:`measure_flops`, one forward and backward under
  ``torch.utils.flop_counter.FlopCounterMode``, on the meta device;
- :mod:`~accel.throughput.peaks`: the table of dense peak FLOP/s per device and dtype,
  each row with its datasheet;
- :mod:`~accel.throughput.summary`: the record each worker leaves and the line
  ``accel launch`` prints (torch-free).

Importing this package imports nothing: names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports

if TYPE_CHECKING:  # what editors see; at run time each name loads on first use
    from accel.throughput.flops import measure_flops as measure_flops
    from accel.throughput.monitor import ThroughputKwargs as ThroughputKwargs
    from accel.throughput.monitor import ThroughputMonitor as ThroughputMonitor
    from accel.throughput.peaks import PEAKS as PEAKS
    from accel.throughput.peaks import compute_dtype as compute_dtype
    from accel.throughput.peaks import peak_flops as peak_flops

_NAMES = {
    "ThroughputKwargs": "accel.throughput.monitor",
    "ThroughputMonitor": "accel.throughput.monitor",
    "measure_flops": "accel.throughput.flops",
    "PEAKS": "accel.throughput.peaks",
    "peak_flops": "accel.throughput.peaks",
    "compute_dtype": "accel.throughput.peaks",
}

__all__ = sorted(_NAMES)

__getattr__, __dir__ = exports(__name__, _NAMES)
