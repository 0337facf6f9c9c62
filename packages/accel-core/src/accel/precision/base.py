"""The Precision ABC: autocast, loss scaling and the optimizer step for one numeric format."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, cast

import torch

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from accel.kwargs import AutocastKwargs, KwargsHandler


class PrecisionContext(Protocol):
    """What a precision may read of the run it is bound to (a :class:`~accel.backends.BackendContext`)."""

    @property
    def device(self) -> torch.device:
        """This process's device."""
        ...

    @property
    def distributed_type(self) -> str:
        """The training strategy (``NO``, ``MULTI_GPU``, ``FSDP``, ...)."""
        ...

    @property
    def num_processes(self) -> int:
        """Number of processes."""
        ...

    @property
    def process_index(self) -> int:
        """This process's global rank."""
        ...

    @property
    def plugins(self) -> Mapping[str, object]:
        """The strategy plugin objects by keyword (``fsdp_plugin``, ...)."""
        ...


class BackwardKwargs(TypedDict, total=False):
    """The keywords ``Tensor.backward`` takes besides the loss (``accelerator.backward(loss, **kwargs)``)."""

    gradient: torch.Tensor | None
    retain_graph: bool | None
    create_graph: bool
    inputs: torch.Tensor | list[torch.Tensor] | None


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
    _context_ref: weakref.ref[PrecisionContext] | None = None

    @property
    def context(self) -> PrecisionContext | None:
        """The run's :class:`~accel.backends.BackendContext` once :meth:`bind` gave it (None for a
        precision made by hand): read process facts there, never from the process-wide state.

        Held weakly: the context holds its precision, and a cycle would keep the prepared
        objects alive after their Accelerator is gone, until the garbage collector runs.
        """
        return self._context_ref() if self._context_ref is not None else None

    @context.setter
    def context(self, context: PrecisionContext | None) -> None:
        self._context_ref = weakref.ref(context) if context is not None else None

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)  # a pickled Accelerator carries its context along
        state["_context_ref"] = None
        state["_context"] = self.context
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        context = state.pop("_context", None)
        self.__dict__.update(state)
        self.context = cast("PrecisionContext | None", context)  # what __getstate__ stored

    def __init__(
        self, name: str, device: torch.device, handlers: dict[str, KwargsHandler] | None = None
    ):
        self.name = name
        self.device = device
        self.handlers: dict[str, KwargsHandler] = handlers or {}
        self.scaler: torch.amp.GradScaler | None = None

    def bind(self, context: PrecisionContext) -> None:
        """Called with the run's context when it becomes the run's precision (before the backend
        is built). Default: keep it as :attr:`context`; a subclass may also check that it can
        run there (raise to refuse)."""
        self.context = context

    def autocast(
        self, autocast_handler: AutocastKwargs | None = None
    ) -> contextlib.AbstractContextManager:
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

    def backward(self, loss: torch.Tensor, **kwargs: Unpack[BackwardKwargs]) -> None:
        """Back-propagate, scaling the loss if this precision uses a scaler."""
        loss.backward(**kwargs)

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Divide the gradients of ``optimizer`` by the loss scale (before clipping)."""

    def optimizer_step(
        self, optimizer: torch.optim.Optimizer, closure: Callable[[], float] | None = None
    ) -> bool:
        """Step ``optimizer``; return False if the step was skipped (overflow)."""
        if closure is not None:
            optimizer.step(closure)
        else:
            optimizer.step()
        return True

    def state_dict(self) -> dict[str, object] | None:
        """State to checkpoint (the loss scaler's), or None."""
        return None

    def load_state_dict(self, state: dict[str, object]) -> None:
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
