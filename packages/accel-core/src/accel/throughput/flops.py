"""Counting the FLOPs of one forward and backward pass with ``torch.utils.flop_counter``.

:func:`measure_flops` runs the model once under
:class:`~torch.utils.flop_counter.FlopCounterMode`, by default on the *meta* device: the
parameters, buffers and inputs are replaced by meta tensors of the same shapes
(``torch.func.functional_call``), so nothing is computed, no memory is used and the
model's parameters and gradients are untouched. A model whose forward depends on the
values of its inputs cannot run on meta tensors; ``device="real"`` then runs it on its own
device, with the gradients taken by ``torch.autograd.grad`` (``.grad`` is not touched).

What FlopCounterMode counts is the matrix work (``mm``, ``addmm``, ``bmm``, convolutions,
scaled-dot-product and flex attention): elementwise work, norms and softmax are left out,
as in the usual ``6 * N * T`` count of a transformer. A multiply-add is 2 FLOPs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import torch


def _loss_of(output: object) -> torch.Tensor:
    """The scalar to differentiate: ``output.loss`` / ``output["loss"]``, else the first tensor summed."""
    import torch

    loss = getattr(output, "loss", None)
    if loss is None and isinstance(output, dict):
        loss = output.get("loss")
    if loss is not None:
        return loss
    if isinstance(output, torch.Tensor):
        return output.sum()
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0].sum()
    logits = getattr(output, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits.sum()
    raise TypeError(
        f"measure_flops: cannot find a loss in the model's output ({type(output).__name__}): "
        "pass loss_fn=lambda output: ... returning a scalar tensor"
    )


def _meta_tensor(value: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.empty_like(value, device="meta").requires_grad_(value.requires_grad)


def _to_meta(value: object) -> object:
    import torch

    if isinstance(value, torch.Tensor):
        return _meta_tensor(value)
    if isinstance(value, dict):
        return type(value)({k: _to_meta(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_to_meta(v) for v in value)
    return value


def measure_flops(
    model: torch.nn.Module,
    *args: object,
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
    backward: bool = True,
    device: str = "auto",
    **kwargs: object,
) -> int:
    """FLOPs of ``model(*args, **kwargs)`` and, with ``backward``, of its backward pass.

    ``loss_fn(output)`` gives the scalar to differentiate (default: ``output.loss``, else
    the output summed). ``device="meta"`` counts on meta tensors: nothing is computed and
    the model is untouched; ``device="real"`` runs once on the model's own device and
    leaves ``.grad`` as it was; ``"auto"`` (default) tries meta, then real when the forward
    reads its inputs' values (``Tensor.item()`` in transformers' mask code under sdpa).
    Measure the model as it computes, not sharded by FSDP: measure it before ``prepare``.
    """
    if device not in ("meta", "real", "auto"):
        raise ValueError(f"measure_flops(device={device!r}): use 'meta', 'real' or 'auto'")
    model = getattr(model, "module", model)  # a DDP-style wrapper computes what it wraps
    if device == "auto":
        try:
            return _count(model, args, kwargs, loss_fn, backward, "meta")
        except (RuntimeError, NotImplementedError):  # a value read on a meta tensor
            device = "real"
    return _count(model, args, kwargs, loss_fn, backward, device)


def _count(
    model: torch.nn.Module,
    args: tuple[object, ...],
    kwargs: dict[str, object],
    loss_fn: Callable[[Any], torch.Tensor] | None,
    backward: bool,
    device: str,
) -> int:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    if device == "meta":
        state = {
            name: _meta_tensor(t) for name, t in (*model.named_parameters(), *model.named_buffers())
        }
        # the same containers, their tensors on the meta device
        args = cast("tuple[object, ...]", _to_meta(args))
        kwargs = cast("dict[str, object]", _to_meta(kwargs))
    trainable = [p for p in model.parameters() if p.requires_grad]
    counter = FlopCounterMode(display=False)
    with counter:
        if device == "meta":
            output = torch.func.functional_call(model, state, args, kwargs)
            trainable = [t for t in state.values() if t.requires_grad]
        else:
            output = model(*args, **kwargs)
        if backward:
            loss = loss_fn(output) if loss_fn is not None else _loss_of(output)
            if trainable:
                torch.autograd.grad(loss, trainable, allow_unused=True)
    return int(counter.get_total_flops())


__all__ = ["measure_flops"]
