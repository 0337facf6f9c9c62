"""Core's precisions: ``no``, ``fp16`` (autocast + GradScaler) and ``bf16`` (autocast)."""

from __future__ import annotations

import contextlib
import functools
import types
from typing import Any

import torch

from accel.distributed.operations import convert_to_fp32
from accel.precision.base import Precision


class FullPrecision(Precision):
    """``mixed_precision="no"``: everything in the model's own dtype."""

    names = ("no",)


class _AutocastPrecision(Precision):
    dtype: torch.dtype = torch.bfloat16

    _autocast_kwargs: dict[str, Any] | None = None

    def autocast(self, autocast_handler: Any = None) -> contextlib.AbstractContextManager:
        if autocast_handler is not None:
            kwargs = autocast_handler.to_kwargs()
        else:  # this precision's own AutocastKwargs: read once, not on every forward
            kwargs = self._autocast_kwargs
            if kwargs is None:
                handler = self.handlers.get("AutocastKwargs")
                kwargs = handler.to_kwargs() if handler is not None else {}
                self._autocast_kwargs = kwargs
        return torch.autocast(device_type=self.device.type, dtype=self.dtype, **kwargs)

    def forward_context(self, model: torch.nn.Module) -> contextlib.AbstractContextManager:
        """The context a wrapped ``model``'s forward runs under (default: :meth:`autocast`)."""
        return self.autocast()

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        if getattr(model.forward, "_accel_precision", None) is not None:
            return model
        original = model.forward
        precision = self
        function = getattr(original, "__func__", None)
        if function is not None and getattr(original, "__self__", None) is model:
            # Bind the wrapper as a method of ``model`` (as Accelerate does): copy.deepcopy of the
            # prepared model then rebinds it to the copy instead of running the original's forward.
            @functools.wraps(function)
            def method(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
                with precision.forward_context(module):
                    outputs = function(module, *args, **kwargs)
                return _outputs_to_fp32(outputs)

            method._accel_precision = self  # type: ignore[attr-defined]
            method._accel_original_forward = function  # type: ignore[attr-defined]
            method._accel_original_is_function = True  # type: ignore[attr-defined]
            model.forward = types.MethodType(method, model)
            return model

        @functools.wraps(original)
        def forward(*args: Any, **kwargs: Any) -> Any:
            with precision.forward_context(model):
                outputs = original(*args, **kwargs)
            return _outputs_to_fp32(outputs)

        forward._accel_precision = self  # type: ignore[attr-defined]
        forward._accel_original_forward = original  # type: ignore[attr-defined]
        model.forward = forward
        return model


_HALF = (torch.float16, torch.bfloat16)


def _outputs_to_fp32(outputs: Any) -> Any:
    """:func:`~accel.utils.convert_to_fp32`, with a short path for a single tensor."""
    if type(outputs) is torch.Tensor:
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

    def __init__(self, name: str, device: torch.device, handlers: dict[str, Any] | None = None):
        super().__init__(name, device, handlers)
        handler = self.handlers.get("GradScalerKwargs")
        kwargs = handler.to_kwargs() if handler is not None else {}
        self.scaler = torch.amp.GradScaler(device.type, **kwargs)
        self._unscaled: set[int] = set()

    def backward(self, loss: torch.Tensor, **kwargs: Any) -> None:
        self.scaler.scale(loss).backward(**kwargs)

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        if id(optimizer) not in self._unscaled:
            self.scaler.unscale_(optimizer)
            self._unscaled.add(id(optimizer))

    def optimizer_step(self, optimizer: torch.optim.Optimizer, closure: Any = None) -> bool:
        scale_before = self.scaler.get_scale()
        self.scaler.step(optimizer, closure) if closure is not None else self.scaler.step(optimizer)
        self.scaler.update()
        self._unscaled.discard(id(optimizer))
        return not self.scaler.get_scale() < scale_before

    def state_dict(self) -> dict[str, Any] | None:
        return self.scaler.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scaler.load_state_dict(state)
