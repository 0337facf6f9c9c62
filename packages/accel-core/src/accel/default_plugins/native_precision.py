"""Default plugin: the ``no``, ``fp16`` and ``bf16`` precisions."""

from __future__ import annotations

from accel.hookspecs import hookimpl


@hookimpl
def accel_precisions() -> list[type]:
    """Core's native torch precisions."""
    from accel.precision.native import BF16Precision, FP16Precision, FullPrecision

    return [FullPrecision, FP16Precision, BF16Precision]
