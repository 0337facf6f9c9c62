"""The DDP backend: wraps models in ``DistributedDataParallel`` and skips all-reduce on accumulation steps."""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import TYPE_CHECKING

import torch
from accel.backends import Backend, BackendContext
from accel.catalog import DATA_PARALLEL_TYPES
from torch.nn.parallel import DistributedDataParallel

from .kwargs import DistributedDataParallelKwargs

if TYPE_CHECKING:
    from accel.precision.base import BackwardKwargs
    from torch.distributed import ProcessGroup
    from typing_extensions import Unpack


class DDPBackend(Backend):
    """Data parallelism over every process: each holds the whole model, gradients are averaged."""

    name = "ddp"
    distributed_types = DATA_PARALLEL_TYPES

    @property
    def kwargs(self) -> DistributedDataParallelKwargs:
        """The ``DistributedDataParallelKwargs`` passed to the Accelerator, or the defaults."""
        return (
            self.context.handlers.get("DistributedDataParallelKwargs")
            or DistributedDataParallelKwargs()
        )

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Wrap a model with trainable parameters in DDP and install the comm hook."""
        if not any(p.requires_grad for p in model.parameters()):
            return model
        device = self.context.device
        device_ids = [device.index] if device.type != "cpu" and device.index is not None else None
        if device_ids is not None and len({p.device for p in model.parameters()}) > 1:
            raise ValueError(
                "this model's parameters are on several devices; DDP needs each process's model on one device "
                "(do not pass a multi-device device_map when training with several processes)"
            )
        kwargs = self.kwargs
        wrapped = DistributedDataParallel(
            model,
            device_ids=device_ids,
            output_device=device_ids[0] if device_ids else None,
            **kwargs.ddp_kwargs(),
        )
        kwargs.register_comm_hook(wrapped)
        return wrapped

    def __init__(self, context: BackendContext):
        super().__init__(context)
        self._armed_by_next_loss: list[DistributedDataParallel] = []

    def synchronize_gradients(self, models: list[torch.nn.Module]) -> None:
        """Average the gradients each DDP model accumulated under ``no_sync`` over its process group.

        ``train_step`` (automatic micro-batching) runs every micro-batch under ``no_sync`` and
        calls this once every process has agreed the step fitted, so that no process is left
        in a gradient all-reduce when another ran out of memory. A plain all-reduce of the
        gradients in buckets of up to 2**24 elements: a registered comm hook is not applied.
        """
        for model in models:
            if isinstance(model, DistributedDataParallel):
                average_gradients(list(model.parameters()), model.process_group)

    def backward(self, loss: torch.Tensor, **kwargs: Unpack[BackwardKwargs]) -> None:
        """Back-propagate ``loss``; first arm models waiting in :meth:`trigger_sync_in_backward` for it."""
        while self._armed_by_next_loss:
            self._armed_by_next_loss.pop().reducer.prepare_for_backward([loss])
        super().backward(loss, **kwargs)

    @contextlib.contextmanager
    def trigger_sync_in_backward(self, model: torch.nn.Module) -> Generator[None, None, None]:
        """Make the next backward of ``model`` all-reduce gradients although its forward ran under ``no_sync``.

        DDP decides in ``forward`` whether the following backward synchronises: under
        ``no_sync`` it leaves its reducer unarmed, so the gradient hooks only accumulate
        locally. Inside this block the reducer is armed again (the call DDP's forward makes
        when it syncs), so the hooks of the next backward fill the buckets with the gradients
        accumulated so far and all-reduce them (through the comm hook, if any). With
        ``find_unused_parameters=True`` the reducer must know which parameters the loss
        reaches, so it is armed by the loss of the next ``accelerator.backward`` in the block.
        """
        if not isinstance(model, DistributedDataParallel):
            yield
            return
        saved = (model.require_backward_grad_sync, model.require_forward_param_sync)
        model.require_backward_grad_sync = True
        model.require_forward_param_sync = True
        by_loss = model.find_unused_parameters and not model.static_graph
        if by_loss:
            self._armed_by_next_loss.append(model)
        else:
            model.reducer.prepare_for_backward([])
        try:
            yield
        except BaseException:
            if model in self._armed_by_next_loss:
                self._armed_by_next_loss.remove(model)
            raise
        finally:
            model.require_backward_grad_sync, model.require_forward_param_sync = saved
        if model in self._armed_by_next_loss:
            self._armed_by_next_loss.remove(model)
            raise RuntimeError(
                "trigger_sync_in_backward: a DDP model with find_unused_parameters=True is synchronised by "
                "the loss of accelerator.backward(loss); call it inside the block instead of loss.backward()"
            )

    @contextlib.contextmanager
    def join_uneven_inputs(
        self, joinables: list[object], even_batches: bool | None = None
    ) -> Generator[None, None, None]:
        """Let processes with fewer batches finish while the others continue (``torch.distributed.algorithms.Join``)."""
        from torch.distributed.algorithms import Join

        with self.context.override_even_batches(even_batches):
            with Join([j for j in joinables if isinstance(j, DistributedDataParallel)]):
                yield


def average_gradients(
    parameters: list[torch.nn.Parameter],
    group: ProcessGroup | None = None,
    bucket_elements: int = 2**24,
) -> None:
    """All-reduce the mean of ``parameters``' gradients over ``group`` (a missing one counts as zeros).

    Gradients of one dtype and device are flattened into buckets of up to ``bucket_elements``
    elements, one all-reduce each.
    """
    world = torch.distributed.get_world_size(group)
    trainable = [p for p in parameters if p.requires_grad]
    buckets: dict[tuple, list[list[torch.Tensor]]] = {}
    for param in trainable:
        grad = param.grad
        if grad is None:
            grad = param.grad = torch.zeros_like(param)
        rows = buckets.setdefault((grad.dtype, grad.device), [[]])
        if rows[-1] and sum(g.numel() for g in rows[-1]) + grad.numel() > bucket_elements:
            rows.append([])
        rows[-1].append(grad)
    for rows in buckets.values():
        for grads in rows:
            flat = torch.cat([g.reshape(-1) for g in grads])
            torch.distributed.all_reduce(flat, group=group)
            flat.div_(world)
            offset = 0
            for grad in grads:
                grad.copy_(flat[offset : offset + grad.numel()].view_as(grad))
                offset += grad.numel()
