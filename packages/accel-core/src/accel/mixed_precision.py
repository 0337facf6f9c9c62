"""Accelerate's stand-alone mixed-precision helpers: a grad scaler and an autocast context."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from accel.precision import dtype_of


def get_grad_scaler(distributed_type: object = None, **kwargs: Any) -> torch.amp.GradScaler:
    """A ``torch.amp.GradScaler`` for the device this process uses (``kwargs`` go to it)."""
    del distributed_type  # FSDP's sharded scaler comes with accel-fsdp's backend
    from accel.state import PartialState

    device = PartialState().device
    return torch.amp.GradScaler(device.type, **kwargs)


def get_mixed_precision_context_manager(
    native_amp: bool = False, autocast_kwargs: Any = None
) -> contextlib.AbstractContextManager:
    """``torch.autocast`` for this process's device and ``mixed_precision`` when ``native_amp``, else a no-op.

    The autocast dtype is the ``dtype`` of the precision class serving ``mixed_precision``
    (:func:`accel.precision.dtype_of`: fp8 autocasts to bf16, as Accelerate does).
    """
    if not native_amp:
        return contextlib.nullcontext()
    from accel.state import AcceleratorState, PartialState

    state = PartialState()
    precision = (
        getattr(AcceleratorState(), "mixed_precision", "no")
        if AcceleratorState._shared_state
        else "no"
    )
    kwargs = (
        autocast_kwargs.to_kwargs()
        if hasattr(autocast_kwargs, "to_kwargs")
        else dict(autocast_kwargs or {})
    )
    dtype = dtype_of(precision)
    if dtype == torch.float32:
        return contextlib.nullcontext()
    kwargs.setdefault("dtype", dtype)
    return torch.autocast(device_type=state.device.type, **kwargs)
