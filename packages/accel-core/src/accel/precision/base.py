"""The Precision ABC: autocast, loss scaling and the optimizer step for one numeric format."""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

import torch


class Precision:
    """A ``mixed_precision`` value. The default is full precision: no autocast, no scaler.

    Subclasses set :attr:`names` and override what differs. ``handlers`` holds the
    Accelerator's kwargs handlers by class name (``AutocastKwargs``, ``GradScalerKwargs``,
    ``FP8RecipeKwargs``, ...).
    """

    names: tuple[str, ...] = ()
    """The ``mixed_precision`` values this class serves."""
    dtype: torch.dtype | None = None
    """The floating type the forward computes in (autocast), None for the model's own (full
    precision). The one precision fact a backend that casts itself reads: FSDP's mixed-precision
    policy, DeepSpeed's ``fp16``/``bf16`` sections, Megatron-LM's ``params_dtype``."""
    fp8: bool = False
    """True when some layers compute in FP8 (the others in :attr:`dtype`)."""
    _context_ref: Any = None

    @property
    def context(self) -> Any:
        """The run's :class:`~accel.backends.BackendContext` once :meth:`bind` gave it (None for a
        precision made by hand): read process facts there, never from the process-wide state.

        Held weakly: the context holds its precision, and a cycle would keep the prepared
        objects alive after their Accelerator is gone, until the garbage collector runs.
        """
        return self._context_ref() if self._context_ref is not None else None

    @context.setter
    def context(self, context: Any) -> None:
        self._context_ref = weakref.ref(context) if context is not None else None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)  # a pickled Accelerator carries its context along
        state["_context_ref"] = None
        state["_context"] = self.context
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        context = state.pop("_context", None)
        self.__dict__.update(state)
        self.context = context

    def __init__(self, name: str, device: torch.device, handlers: dict[str, Any] | None = None):
        self.name = name
        self.device = device
        self.handlers = handlers or {}
        self.scaler: Any = None

    def bind(self, context: Any) -> None:
        """Called with the run's context when it becomes the run's precision (before the backend
        is built). Default: keep it as :attr:`context`; a subclass may also check that it can
        run there (raise to refuse)."""
        self.context = context

    def autocast(self, autocast_handler: Any = None) -> contextlib.AbstractContextManager:
        """Context manager under which operations run in this precision."""
        return contextlib.nullcontext()

    def prepare(self, objects: list[Any]) -> list[Any]:
        """Convert the objects of one ``Accelerator.prepare`` call together, before the backend.

        A precision that swaps a model's layers (FP8) re-points the optimizers passed with it
        at the new parameters here. The default returns ``objects`` unchanged.
        """
        return objects

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Make the model's forward run under :meth:`autocast` (default: unchanged)."""
        return model

    def backward(self, loss: torch.Tensor, **kwargs: Any) -> None:
        """Back-propagate, scaling the loss if this precision uses a scaler."""
        loss.backward(**kwargs)

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Divide the gradients of ``optimizer`` by the loss scale (before clipping)."""

    def optimizer_step(self, optimizer: torch.optim.Optimizer, closure: Any = None) -> bool:
        """Step ``optimizer``; return False if the step was skipped (overflow)."""
        if closure is not None:
            optimizer.step(closure)
        else:
            optimizer.step()
        return True

    def state_dict(self) -> dict[str, Any] | None:
        """State to checkpoint (the loss scaler's), or None."""
        return None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""


def dtype_of(value: Precision | type[Precision] | str | torch.dtype) -> torch.dtype:
    """The torch dtype a precision, a precision name or a dtype name computes in.

    A :class:`Precision` (instance or class) gives its :attr:`~Precision.dtype`; a ``mixed_precision`` name
    (``"bf16"``, ``"fp8"``, ...) its registered class's; both ``float32`` for full precision
    (also ``"fp32"``). A torch name (``"float16"``, ``"torch.bfloat16"``, ``"half"``) gives that
    dtype; a dtype is returned as is. Anything else raises ``ValueError``.
    """
    if isinstance(value, torch.dtype):
        return value
    if isinstance(value, Precision) or (isinstance(value, type) and issubclass(value, Precision)):
        return value.dtype or torch.float32
    name = str(value).strip().lower().removeprefix("torch.")
    found = getattr(torch, name, None)
    if isinstance(found, torch.dtype):
        return found
    from accel.plugins import registry

    cls = registry.precisions().get("no" if name == "fp32" else name)
    if cls is None:
        raise ValueError(f"{value!r} names neither a precision nor a torch dtype")
    return getattr(cls, "dtype", None) or torch.float32
