"""Batch helpers of the prepared loaders: fast device placement and empty batches.

:func:`placer` moves a batch to the device (the common batch types decided without a
call per tensor); :class:`EmptySafeCollate` and :func:`empty_like` give processes without
samples in an uneven last round a zero-row batch shaped like the real ones
(``even_batches=False`` with accel's ``empty_batches``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from accel.distributed.operations import send_to_device


def placer(device: torch.device | str, non_blocking: bool) -> Callable[[Any], Any]:
    """``send_to_device(batch, device, non_blocking)`` with the common batch types decided fast.

    Plain tensors, lists, tuples and dicts of them take a short path (a tensor already on
    ``device`` is returned as is); anything else goes through :func:`send_to_device`.
    """
    device = torch.device(device)
    cpu = device.type == "cpu"
    tensor_type = torch.Tensor

    def place(data: Any) -> Any:
        kind = type(data)
        if kind is tensor_type:
            if data.is_cpu if cpu else data.device == device:
                return data
            return data.to(device, non_blocking=non_blocking and data.is_cpu)
        if kind is list or kind is tuple:
            return kind([place(item) for item in data])
        if kind is dict:
            return {key: place(value) for key, value in data.items()}
        return send_to_device(data, device, non_blocking=non_blocking)

    return place


class EmptyBatch:
    """What :class:`EmptySafeCollate` returns for an empty list of samples."""


class EmptySafeCollate:
    """A collate function that lets an empty batch through as an :class:`EmptyBatch` marker."""

    def __init__(self, collate_fn: Any):
        self.collate_fn = collate_fn

    def __call__(self, samples: Any) -> Any:
        if len(samples) == 0:
            return EmptyBatch()
        return self.collate_fn(samples)


def empty_like(batch: Any) -> Any:
    """A batch of the same structure as ``batch`` with no samples (tensors keep trailing dims)."""
    if isinstance(batch, torch.Tensor):
        return batch.new_empty((0, *batch.shape[1:]))
    if isinstance(batch, Mapping):
        return {key: empty_like(value) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        nested = batch and all(isinstance(x, (torch.Tensor, Mapping, list, tuple)) for x in batch)
        if not nested:  # the batch dimension itself, e.g. a list of strings
            return type(batch)() if not hasattr(batch, "_fields") else []
        items = [empty_like(x) for x in batch]
        return type(batch)(*items) if hasattr(batch, "_fields") else type(batch)(items)
    return batch
