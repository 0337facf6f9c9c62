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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what editors see; at run time each name loads on first use
    from accel.throughput.flops import measure_flops as measure_flops
    from accel.throughput.monitor import ThroughputKwargs as ThroughputKwargs
    from accel.throughput.monitor import ThroughputMonitor as ThroughputMonitor
    from accel.throughput.peaks import PEAKS as PEAKS
    from accel.throughput.peaks import compute_dtype as compute_dtype
    from accel.throughput.peaks import peak_flops as peak_flops

_NAMES = {
    "ThroughputKwargs": "monitor",
    "ThroughputMonitor": "monitor",
    "measure_flops": "flops",
    "PEAKS": "peaks",
    "peak_flops": "peaks",
    "compute_dtype": "peaks",
}


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'accel.throughput' has no attribute {name!r}")
    return getattr(importlib.import_module(f"accel.throughput.{module}"), name)


__all__ = sorted(_NAMES)
