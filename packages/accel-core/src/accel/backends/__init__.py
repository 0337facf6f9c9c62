"""Distributed strategies: the :class:`Backend` ABC and core's single-process backend."""

from accel.backends.base import Backend

__all__ = ["Backend"]
