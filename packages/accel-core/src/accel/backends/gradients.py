"""Gradients set aside for one attempt of a micro-batched step (``Backend.set_aside_gradients``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import torch


class GradientsSetAside(Protocol):
    """What ``Backend.set_aside_gradients`` returns: the gradients held for one attempt."""

    def merge(self) -> bool:
        """Add the held gradients to the attempt's (once); whether there were any."""
        ...

    def discard(self) -> None:
        """Drop the attempt's gradients and put the held ones back."""
        ...


class SetAsideGradients:
    """The ``.grad`` of some tensors, taken off them while an attempt computes new ones.

    Gradients accumulated before the attempt (earlier accumulation steps) are held here and the
    tensors start the attempt with no gradient. :meth:`merge` adds the held gradients to the
    new ones (the attempt succeeded, or a backward that reduces is about to run); :meth:`discard`
    drops the new ones and puts the held ones back (the attempt ran out of memory).
    """

    def __init__(self, tensors: Iterable[torch.Tensor]):
        self.tensors = [t for t in tensors if t.requires_grad]
        self.held = [(t, t.grad) for t in self.tensors if t.grad is not None]
        for tensor, _ in self.held:
            tensor.grad = None
        self.merged = False

    def merge(self) -> bool:
        """Add the held gradients to the current ones (once); whether there were any."""
        if self.merged:
            return False
        self.merged = True
        for tensor, grad in self.held:
            if tensor.grad is None:
                tensor.grad = grad
            else:
                tensor.grad += grad
        return bool(self.held)

    def discard(self) -> None:
        """Drop the gradients computed since, and put the held ones back."""
        for tensor in self.tensors:
            tensor.grad = None
        if not self.merged:
            for tensor, grad in self.held:
                tensor.grad = grad
        self.merged = True


class SetAsideGroup:
    """Several :class:`SetAsideGradients` (or objects with the same two methods) acting as one."""

    def __init__(self, parts: list[GradientsSetAside]):
        self.parts = parts

    def merge(self) -> bool:
        """Merge every part; whether any held a gradient."""
        return any([part.merge() for part in self.parts])

    def discard(self) -> None:
        """Discard every part."""
        for part in self.parts:
            part.discard()
