"""Numeric precision: the :class:`Precision` ABC and core's no/fp16/bf16 precisions."""

from accel.precision.base import Precision, dtype_of

__all__ = ["Precision", "dtype_of"]
