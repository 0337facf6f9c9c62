"""torchao float8 training: which ``nn.Linear`` layers become ``Float8Linear``, and the conversion.

For numerical stability the first and the last ``nn.Linear`` of the model stay in high
precision (FP32 or BF16). A layer whose ``in_features`` or ``out_features`` is not a multiple
of 16 also stays: FP8 matrix-multiply kernels (``torch._scaled_mm``) need such sizes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle
    from torchao.float8 import Float8LinearConfig

ModuleFilter = Callable[[torch.nn.Module, str], bool]
"""``module_filter_func(module, fqn)``: whether the layer ``fqn`` becomes FP8."""

FP8_DIM_MULTIPLE = 16
"""FP8 GEMM kernels need both sizes of a weight to be multiples of this."""


def find_first_last_linear_layers(model: torch.nn.Module) -> tuple[str | None, str | None]:
    """The qualified names of the first and the last ``nn.Linear`` of ``model`` (module order)."""
    first = last = None
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            first = name if first is None else first
            last = name
    return first, last


def fp8_compatible_dims(module: torch.nn.Linear) -> bool:
    """Whether a Linear's ``in_features`` and ``out_features`` suit the FP8 kernels."""
    return (
        module.in_features % FP8_DIM_MULTIPLE == 0 and module.out_features % FP8_DIM_MULTIPLE == 0
    )


def filter_linear_layers(module: torch.nn.Module, fqn: str, layers_to_filter: list[str]) -> bool:
    """True for a module that may become FP8: not in ``layers_to_filter`` and, for an
    ``nn.Linear``, with sizes that are multiples of 16."""
    if isinstance(module, torch.nn.Linear) and not fp8_compatible_dims(module):
        return False
    return fqn not in layers_to_filter


def filter_first_and_last_linear_layers(model: torch.nn.Module) -> ModuleFilter:
    """The default module filter for ``model``: every FP8-sized Linear but its first and last."""
    first, last = find_first_last_linear_layers(model)
    keep = [name for name in (first, last) if name is not None]
    return functools.partial(filter_linear_layers, layers_to_filter=keep)


def _with_dim_check(user_filter: ModuleFilter) -> ModuleFilter:
    def module_filter(module: torch.nn.Module, fqn: str) -> bool:
        if isinstance(module, torch.nn.Linear) and not fp8_compatible_dims(module):
            return False
        return bool(user_filter(module, fqn))

    return module_filter


def default_config(
    pad_inner_dim: bool = True, enable_fsdp_float8_all_gather: bool = False
) -> Float8LinearConfig:
    """A ``torchao.float8.Float8LinearConfig`` with these two settings, the rest torchao's defaults."""
    from torchao.float8 import Float8LinearConfig

    return Float8LinearConfig(
        pad_inner_dim=pad_inner_dim, enable_fsdp_float8_all_gather=enable_fsdp_float8_all_gather
    )


def convert_model_to_fp8_ao(
    model: torch.nn.Module,
    config: Float8LinearConfig | None = None,
    module_filter_func: ModuleFilter | None = None,
) -> torch.nn.Module:
    """Swap ``model``'s ``nn.Linear`` layers for torchao ``Float8Linear`` in place.

    ``module_filter_func(module, fqn)`` chooses the layers (default:
    :func:`filter_first_and_last_linear_layers`); layers with sizes the FP8 kernels cannot
    take are never converted. The parameters are kept (same objects), so an optimizer built
    before the conversion still holds them.
    """
    from torchao.float8 import convert_to_float8_training

    user_filter = module_filter_func or filter_first_and_last_linear_layers(model)
    convert_to_float8_training(
        model,
        module_filter_fn=_with_dim_check(user_filter),
        config=config if config is not None else default_config(),
    )
    return model


def has_ao_layers(model: torch.nn.Module) -> bool:
    """Whether ``model`` holds a torchao ``Float8Linear``."""
    from torchao.float8.float8_linear import Float8Linear

    return any(isinstance(m, Float8Linear) for m in model.modules())


def precompute_scales_after_step(
    optimizer: torch.optim.Optimizer, model: torch.nn.Module
) -> RemovableHandle:
    """After each ``optimizer`` step, precompute the FP8 scales of ``model``'s weights once
    ``model`` is sharded with FSDP2 (what float8 all-gather needs); returns the hook handle."""
    from torch.distributed.fsdp import FSDPModule

    def hook(*args: object, **kwargs: object) -> None:
        if isinstance(model, FSDPModule):
            from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp

            precompute_float8_dynamic_scale_for_fsdp(model)

    return optimizer.register_step_post_hook(hook)
