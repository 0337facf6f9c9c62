"""Numeric precision: the :class:`Precision` ABC and core's no/fp16/bf16 precisions."""

from accel.precision.base import Precision

__all__ = ["Precision"]
