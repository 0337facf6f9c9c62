"""Batch helpers of the prepared loaders: fast device placement and empty batches.

:func:`placer` moves a batch to the device (the common batch types decided without a
call per tensor); :class:`EmptySafeCollate` and :func:`empty_like` give processes without
samples in an uneven last round a zero-row batch shaped like the real ones
(``even_batches=False`` with accel's ``empty_batches``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import cast

import torch

from accel.distributed.operations import send_to_device


def placer(device: torch.device | str, non_blocking: bool) -> Callable[[object], object]:
    """``send_to_device(batch, device, non_blocking)`` with the common batch types decided fast.

    Plain tensors, lists, tuples and dicts of them take a short path (a tensor already on
    ``device`` is returned as is); anything else goes through :func:`send_to_device`.
    """
    device = torch.device(device)
    cpu = device.type == "cpu"
    tensor_type = torch.Tensor

    def place(data: object) -> object:
        kind = type(data)
        if kind is tensor_type:
            tensor = cast(torch.Tensor, data)
            if tensor.is_cpu if cpu else tensor.device == device:
                return tensor
            return tensor.to(device, non_blocking=non_blocking and tensor.is_cpu)
        if kind is list or kind is tuple:
            return kind([place(item) for item in cast("list[object]", data)])
        if kind is dict:
            return {key: place(value) for key, value in cast("dict[object, object]", data).items()}
        return send_to_device(data, device, non_blocking=non_blocking)

    return place


class EmptyBatch:
    """What :class:`EmptySafeCollate` returns for an empty list of samples."""


class EmptySafeCollate:
    """A collate function that lets an empty batch through as an :class:`EmptyBatch` marker."""

    def __init__(self, collate_fn: Callable[[list[object]], object]):
        self.collate_fn = collate_fn

    def __call__(self, samples: list[object]) -> object:
        if len(samples) == 0:
            return EmptyBatch()
        return self.collate_fn(samples)


def empty_like(batch: object) -> object:
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
        make = cast("Callable[..., object]", type(batch))
        return make(*items) if hasattr(batch, "_fields") else make(items)
    return batch
