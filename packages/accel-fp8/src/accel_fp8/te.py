"""TransformerEngine: recipe translation, layer swapping, and the FP8 autocast context.

The translation is written against TransformerEngine's documented API and reads the
installed version's signatures: ``transformer_engine.common.recipe.DelayedScaling`` took
``interval`` (deprecated, unused) and ``override_linear_precision`` in 1.x; 2.0 dropped
``override_linear_precision`` and 2.3 ``interval``. ``transformer_engine.pytorch.autocast
(enabled, calibrating, recipe, amax_reduction_group)`` replaced ``fp8_autocast(enabled,
calibrating, fp8_recipe, fp8_group)`` in 2.x. Only what the installed version accepts is passed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from collections.abc import Collection
from types import ModuleType
from typing import TYPE_CHECKING, cast

import torch

from .ao import fp8_compatible_dims

if TYPE_CHECKING:
    from .recipes import TERecipeKwargs

_OVERRIDES_TE_ACCEPTS = ((False, False, False), (False, False, True))


def recipe_arguments(handler: TERecipeKwargs, accepted: Collection[str]) -> dict[str, object]:
    """Keyword arguments for ``DelayedScaling`` from a ``TERecipeKwargs``.

    ``accepted`` names the parameters the installed ``DelayedScaling`` takes; ``fp8_format``
    stays a name (``HYBRID`` / ``E4M3``) for :func:`build_recipe` to turn into the enum.
    ``interval`` is never passed: TransformerEngine documents it as deprecated and unused.
    """
    kwargs: dict[str, object] = {
        "margin": handler.margin,
        "fp8_format": handler.fp8_format,
        "amax_history_len": handler.amax_history_len,
        "amax_compute_algo": handler.amax_compute_algo,
    }
    assert handler.override_linear_precision is not None  # filled by the recipe's __post_init__
    override = tuple(handler.override_linear_precision)
    if "override_linear_precision" in accepted:
        if override not in _OVERRIDES_TE_ACCEPTS:
            raise ValueError(
                f"override_linear_precision={override}: TransformerEngine only supports running "
                "the wgrad GEMM in higher precision: use (false, false, false) or (false, false, true)"
            )
        kwargs["override_linear_precision"] = override
    elif any(override):
        raise ValueError(
            f"override_linear_precision={override}: the installed TransformerEngine (>= 2.0) no "
            "longer supports it; leave it (false, false, false)"
        )
    unknown = set(kwargs) - set(accepted)
    if unknown:
        raise ValueError(
            f"the installed TransformerEngine's DelayedScaling does not take {sorted(unknown)}"
        )
    return kwargs


def build_recipe(handler: TERecipeKwargs) -> object:
    """The ``DelayedScaling`` recipe of a ``TERecipeKwargs`` (imports TransformerEngine); only
    handed to :func:`fp8_autocast`."""
    from transformer_engine.common import recipe as te_recipe

    cls = te_recipe.DelayedScaling  # a (pydantic) dataclass: its fields are its parameters
    if dataclasses.is_dataclass(cls):
        accepted = [f.name for f in dataclasses.fields(cls) if f.init]
    else:
        accepted = list(inspect.signature(cls).parameters)
    kwargs = recipe_arguments(handler, accepted)
    kwargs["fp8_format"] = getattr(te_recipe.Format, str(kwargs["fp8_format"]))
    return te_recipe.DelayedScaling(**kwargs)


def autocast_call(
    has_autocast: bool, enabled: bool, recipe: object
) -> tuple[str, dict[str, object]]:
    """``(function name, kwargs)`` entering TransformerEngine's FP8 region: ``autocast`` (2.x)
    when the module has it, else ``fp8_autocast`` (1.x)."""
    if has_autocast:
        return "autocast", {"enabled": enabled, "recipe": recipe}
    return "fp8_autocast", {"enabled": enabled, "fp8_recipe": recipe}


def fp8_autocast(enabled: bool, recipe: object) -> contextlib.AbstractContextManager[object]:
    """TransformerEngine's FP8 autocast context manager for ``recipe``."""
    import transformer_engine.pytorch as te

    name, kwargs = autocast_call(hasattr(te, "autocast"), enabled, recipe)
    return getattr(te, name)(**kwargs)


def plan_layer_swaps(model: torch.nn.Module) -> list[tuple[str, str]]:
    """``[(qualified name, "Linear" | "LayerNorm")]``: the layers :func:`convert_model` swaps.

    An ``nn.Linear`` qualifies when both sizes are multiples of 16 (TransformerEngine's FP8
    GEMMs need that); an ``nn.LayerNorm`` over one dimension with weight and bias always.
    """
    plan = []
    for name, module in model.named_modules():
        if type(module) is torch.nn.Linear and fp8_compatible_dims(module):
            plan.append((name, "Linear"))
        elif (
            type(module) is torch.nn.LayerNorm
            and len(module.normalized_shape) == 1
            and module.weight is not None
            and module.bias is not None
        ):
            plan.append((name, "LayerNorm"))
    return plan


def layer_arguments(
    module: torch.nn.Module, kind: str, device: torch.device | str
) -> tuple[tuple[int, ...], dict[str, object]]:
    """``(args, kwargs)`` building the TE twin of ``module``: ``te.Linear(in_features,
    out_features, bias=, params_dtype=, device=)`` or ``te.LayerNorm(hidden size, eps=,
    params_dtype=, device=)``."""
    common = {"params_dtype": module.weight.dtype, "device": device}
    if kind == "Linear":
        linear = cast("torch.nn.Linear", module)
        return (linear.in_features, linear.out_features), {
            "bias": linear.bias is not None,
            **common,
        }
    norm = cast("torch.nn.LayerNorm", module)  # a LayerNorm (kind)
    return (norm.normalized_shape[0],), {"eps": norm.eps, **common}


def _replacement(
    module: torch.nn.Module, kind: str, te: ModuleType, device: torch.device | str
) -> torch.nn.Module:
    args, kwargs = layer_arguments(module, kind, device)
    new = getattr(te, kind)(*args, **kwargs)
    with torch.no_grad():
        new.weight.copy_(module.weight)
        if module.bias is not None:
            new.bias.copy_(module.bias)
    return new


def convert_model(model: torch.nn.Module, device: torch.device | str = "cuda") -> torch.nn.Module:
    """Swap, in place, the layers :func:`plan_layer_swaps` lists for ``te.Linear`` /
    ``te.LayerNorm`` (weights copied, created on ``device``; parameter names unchanged)."""
    import transformer_engine.pytorch as te

    for name, kind in plan_layer_swaps(model):
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, _replacement(getattr(parent, child), kind, te, device))
    return model


def has_transformer_engine_layers(model: torch.nn.Module) -> bool:
    """Whether ``model`` holds a TransformerEngine Linear, LayerNorm or TransformerLayer."""
    import transformer_engine.pytorch as te

    kinds = (te.Linear, te.LayerNorm, te.TransformerLayer)
    return any(isinstance(m, kinds) for m in model.modules())


def repoint_optimizers(
    optimizers: list[torch.optim.Optimizer],
    old: dict[str, torch.nn.Parameter],
    new: dict[str, torch.nn.Parameter],
) -> None:
    """Make ``optimizers`` hold the new parameter of each name instead of the old one (state too)."""
    mapping = {id(p): new[name] for name, p in old.items() if name in new}
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            group["params"] = [mapping.get(id(p), p) for p in group["params"]]
        for param in list(optimizer.state):
            if id(param) in mapping and mapping[id(param)] is not param:
                optimizer.state[mapping[id(param)]] = optimizer.state.pop(param)
