"""A hook keeping 8-bit layers runnable inside a dispatched (hooked or offloaded) model.

accel's big-model hooks move and offload weights as plain ``Parameter`` tensors. A
``Linear8bitLt`` needs its weight as an ``Int8Params`` carrying the row scales (``SCB``), so
:class:`Int8WeightHook`, appended after accel's hook, wraps the int8 data again with the
scales it keeps before each forward, and (for offloaded layers) drops the layer's cached
int8 state after it so the weight can leave memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, cast

import torch
from accel.big_model.hooks import HOOK_ATTR, ModelHook, add_hook_to_module

from .params import int8_param


class _MatmulState(Protocol):
    """What the hook clears of bitsandbytes' ``MatmulLtState`` (a ``Linear8bitLt``'s ``state``)."""

    CB: torch.Tensor | None
    SCB: torch.Tensor | None


class Int8WeightHook(ModelHook):
    """Rebuild a ``Linear8bitLt`` weight (an ``Int8Params`` with its ``SCB``) from plain int8 data."""

    def __init__(self, scb: torch.Tensor, offloaded: bool):
        self.scb = scb
        self.offloaded = offloaded

    def init_hook(self, module: torch.nn.Module) -> torch.nn.Module:
        """Wrap the weight now when it is already on its device."""
        self._wrap(module)
        return module

    def pre_forward(
        self, module: torch.nn.Module, *args: object, **kwargs: object
    ) -> tuple[tuple[object, ...], dict[str, object]]:
        """Wrap the weight accel's hook just loaded."""
        self._wrap(module)
        return args, kwargs

    def post_forward(self, module: torch.nn.Module, output: object) -> object:
        """For an offloaded layer, forget the int8 state so the weight is freed with it."""
        if self.offloaded:
            state = cast("_MatmulState", module.state)
            state.CB = None
            state.SCB = None
        return output

    def _wrap(self, module: torch.nn.Module) -> None:
        from bitsandbytes.nn import Int8Params

        weight = module._parameters["weight"]
        if weight is None or isinstance(weight, Int8Params) or weight.device.type == "meta":
            return
        data = weight.data
        scb = self.scb if self.scb.device == data.device else self.scb.to(data.device)
        module._parameters["weight"] = int8_param(data, has_fp16_weights=False, CB=data, SCB=scb)


def attach_int8_hooks(
    model: torch.nn.Module,
    layers: Mapping[str, torch.nn.Module],
    scales: dict[str, torch.Tensor],
    offloaded: set[str],
) -> None:
    """Give every 8-bit layer of a hooked ``model`` an :class:`Int8WeightHook`.

    Only needed when accel's dispatch added hooks (several devices or offloading); a model
    moved whole to one device keeps its ``Int8Params`` as they are.
    """
    if not any(hasattr(m, HOOK_ATTR) for m in model.modules()):
        return
    for name, module in layers.items():
        add_hook_to_module(
            module, Int8WeightHook(scales[name], offloaded=name in offloaded), append=True
        )
