"""The backend for one process on one device: every default of :class:`Backend` as is."""

from __future__ import annotations

from accel.backends.base import Backend


class SingleProcessBackend(Backend):
    """One process, one device (CPU, CUDA, MPS, XPU)."""

    name = "single_process"
    distributed_types = ("NO",)
