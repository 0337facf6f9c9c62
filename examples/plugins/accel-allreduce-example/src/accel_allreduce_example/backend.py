"""``AllReduceBackend``: the model stays unwrapped; gradients are averaged with ``all_reduce``."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from accel.backends import Backend, BackendContext


class AllReduceBackend(Backend):
    """Data parallelism with explicit collectives, written against accel's public API only.

    Claims no distributed type (so it never displaces accel-ddp); select it with
    ``ACCEL_BACKEND=allreduce``.
    """

    name = "allreduce"
    distributed_types = ()

    def __init__(self, context: BackendContext):
        super().__init__(context)
        self.models: list[torch.nn.Module] = []
        """The models this backend prepared; their gradients are averaged after backward."""

    def distributed(self) -> bool:
        """Whether there is more than one process to talk to."""
        return self.context.num_processes > 1 and dist.is_available() and dist.is_initialized()

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Keep ``model`` as is, with rank 0's parameters and buffers on every rank."""
        if self.distributed():
            with torch.no_grad():
                for tensor in [*model.parameters(), *model.buffers()]:
                    dist.broadcast(tensor.data, src=0)
        self.models.append(model)
        return model

    def backward(self, loss: torch.Tensor, **kwargs: Any) -> None:
        """Back-propagate through the precision, then average the gradients on a synchronising step."""
        super().backward(loss, **kwargs)
        if self.context.sync_gradients:
            self.average_gradients()

    def average_gradients(self) -> None:
        """``all_reduce`` (sum) every gradient of the prepared models and divide by the world size."""
        if not self.distributed():
            return
        world_size = self.context.num_processes
        for model in self.models:
            for parameter in model.parameters():
                if parameter.grad is not None:
                    dist.all_reduce(parameter.grad, op=dist.ReduceOp.SUM)
                    parameter.grad.div_(world_size)
