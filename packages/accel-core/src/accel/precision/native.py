"""Core's precisions: ``no``, ``fp16`` (autocast + GradScaler) and ``bf16`` (autocast)."""

from __future__ import annotations

import contextlib
import functools
import types
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from accel.distributed.operations import convert_to_fp32
from accel.precision.base import BackwardKwargs, Precision

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from accel.kwargs import AutocastKwargs, KwargsHandler


class FullPrecision(Precision):
    """``mixed_precision="no"``: everything in the model's own dtype."""

    names = ("no",)


class _AutocastPrecision(Precision):
    dtype: torch.dtype | None = torch.bfloat16
    """The autocast dtype (subclasses set theirs)."""

    _default_autocast: Callable[[], contextlib.AbstractContextManager] | None = None

    def autocast(
        self, autocast_handler: AutocastKwargs | None = None
    ) -> contextlib.AbstractContextManager:
        if autocast_handler is not None:
            return torch.autocast(
                device_type=self.device.type, dtype=self.dtype, **autocast_handler.to_kwargs()
            )
        default = self._default_autocast
        if default is None:
            default = self._default_autocast = self._autocast_factory()
        return default()

    def _autocast_factory(self) -> Callable[[], contextlib.AbstractContextManager]:
        """``torch.autocast`` with this precision's own ``AutocastKwargs``, read once, not on every forward."""
        handler = self.handlers.get("AutocastKwargs")
        kwargs = handler.to_kwargs() if handler is not None else {}
        return functools.partial(
            torch.autocast, device_type=self.device.type, dtype=self.dtype, **kwargs
        )

    def forward_context(self, model: torch.nn.Module) -> contextlib.AbstractContextManager:
        """The context a wrapped ``model``'s forward runs under (default: :meth:`autocast`)."""
        return self.autocast()

    def _direct_autocast(self) -> Callable[[], contextlib.AbstractContextManager] | None:
        """What a wrapped forward may enter directly, decided when the model is wrapped.

        The ``torch.autocast`` factory when neither :meth:`forward_context` nor :meth:`autocast`
        is overridden (no Python frame in between per forward); None otherwise.
        """
        kind = type(self)
        if (
            kind.forward_context is _AutocastPrecision.forward_context
            and kind.autocast is _AutocastPrecision.autocast
        ):
            if self._default_autocast is None:
                self._default_autocast = self._autocast_factory()
            return self._default_autocast
        return None

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        if getattr(model.forward, "_accel_precision", None) is not None:
            return model
        original = model.forward
        precision = self
        direct = self._direct_autocast()
        function = getattr(original, "__func__", None)
        if function is not None and getattr(original, "__self__", None) is model:
            # Bind the wrapper as a method of ``model`` (as Accelerate does): copy.deepcopy of the
            # prepared model then rebinds it to the copy instead of running the original's forward.
            @functools.wraps(function)
            def method(module: torch.nn.Module, *args: object, **kwargs: object) -> object:
                with direct() if direct is not None else precision.forward_context(module):
                    outputs = function(module, *args, **kwargs)
                if type(outputs) is _TENSOR:  # _outputs_to_fp32's short path, without a call
                    return outputs.float() if outputs.dtype in _HALF else outputs
                return convert_to_fp32(outputs)

            method.__dict__.update(
                _accel_precision=self,
                _accel_original_forward=function,
                _accel_original_is_function=True,
            )
            model.forward = types.MethodType(method, model)
            return model

        @functools.wraps(original)
        def forward(*args: object, **kwargs: object) -> object:
            with direct() if direct is not None else precision.forward_context(model):
                outputs = original(*args, **kwargs)
            return _outputs_to_fp32(outputs)

        forward.__dict__.update(_accel_precision=self, _accel_original_forward=original)
        model.forward = forward
        return model


_HALF = (torch.float16, torch.bfloat16)
_TENSOR = torch.Tensor


def _outputs_to_fp32(outputs: object) -> object:
    """:func:`~accel.utils.convert_to_fp32`, with a short path for a single tensor."""
    if type(outputs) is _TENSOR:
        return outputs.float() if outputs.dtype in _HALF else outputs
    return convert_to_fp32(outputs)


class BF16Precision(_AutocastPrecision):
    """``mixed_precision="bf16"``: autocast to bfloat16, no loss scaling needed."""

    names = ("bf16",)
    dtype = torch.bfloat16


class FP16Precision(_AutocastPrecision):
    """``mixed_precision="fp16"``: autocast to float16 with a dynamic ``GradScaler``."""

    names = ("fp16",)
    dtype = torch.float16

    def __init__(
        self, name: str, device: torch.device, handlers: dict[str, KwargsHandler] | None = None
    ):
        super().__init__(name, device, handlers)
        handler = self.handlers.get("GradScalerKwargs")
        kwargs = handler.to_kwargs() if handler is not None else {}
        self.scaler = torch.amp.GradScaler(device.type, **kwargs)
        self._unscaled: set[int] = set()

    def _scaler(self) -> torch.amp.GradScaler:
        """The loss scaler: made in ``__init__``; a backend may replace it (FSDP's sharded one)."""
        scaler = self.scaler
        assert scaler is not None, "FP16Precision.scaler was set to None"
        return scaler

    def backward(self, loss: torch.Tensor, **kwargs: Unpack[BackwardKwargs]) -> None:
        self._scaler().scale(loss).backward(**kwargs)

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        if id(optimizer) not in self._unscaled:
            self._scaler().unscale_(optimizer)
            self._unscaled.add(id(optimizer))

    def optimizer_step(
        self, optimizer: torch.optim.Optimizer, closure: Callable[[], float] | None = None
    ) -> bool:
        scaler = self._scaler()
        scale_before = scaler.get_scale()
        scaler.step(optimizer, closure) if closure is not None else scaler.step(optimizer)
        scaler.update()
        self._unscaled.discard(id(optimizer))
        return not scaler.get_scale() < scale_before

    def state_dict(self) -> dict[str, object] | None:
        return self._scaler().state_dict()

    def load_state_dict(self, state: dict[str, object]) -> None:
        self._scaler().load_state_dict(state)
