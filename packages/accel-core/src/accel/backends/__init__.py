"""Distributed strategies: the :class:`Backend` ABC, core's single-process backend, and the
:class:`BackendContext` a backend reads the run through."""

from accel.backends.base import Backend
from accel.backends.context import BackendContext
from accel.backends.gradients import GradientsSetAside, SetAsideGradients, SetAsideGroup

__all__ = [
    "Backend",
    "BackendContext",
    "GradientsSetAside",
    "SetAsideGradients",
    "SetAsideGroup",
]
