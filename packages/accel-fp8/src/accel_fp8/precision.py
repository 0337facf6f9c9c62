"""The ``mixed_precision="fp8"`` precisions: torchao, TransformerEngine and MS-AMP.

``FP8Precision`` is what the registry serves for ``fp8``; constructing it picks the backend
(:mod:`accel_fp8.selection`) and returns an instance of that backend's subclass. As in
Accelerate, every FP8 backend runs the model's forward under bf16 autocast (the operations
that are not FP8 run in bf16); MS-AMP also scales the loss with a ``GradScaler``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import TYPE_CHECKING, Protocol, cast

import torch
from accel.catalog import STRATEGY_TYPES
from accel.precision.native import BF16Precision, FP16Precision

from . import config as C
from .recipes import AORecipeKwargs, MSAMPRecipeKwargs, TERecipeKwargs, recipe_for
from .selection import select_backend

if TYPE_CHECKING:
    from accel.kwargs import KwargsHandler
    from accel.precision.base import PrecisionContext


class FP8Precision(BF16Precision):
    """``mixed_precision="fp8"``: the backend chosen by the recipe handler, the configuration,
    or what is installed (MS-AMP, then TransformerEngine, then torchao)."""

    names = ("fp8",)
    fp8 = True
    fp8_backend: str = ""
    """``AO``, ``TE`` or ``MSAMP``."""

    def __new__(
        cls, name: str, device: torch.device, handlers: dict[str, KwargsHandler] | None = None
    ) -> FP8Precision:
        if cls is FP8Precision:
            backend = select_backend(handlers or {}, C.launched_backend())
            cls = _BACKEND_CLASSES[backend]
        return super().__new__(cls)

    def __init__(
        self, name: str, device: torch.device, handlers: dict[str, KwargsHandler] | None = None
    ) -> None:
        super().__init__(name, device, handlers)
        self.recipe = recipe_for(self.fp8_backend, self.handlers)
        """This backend's recipe kwargs handler (``AORecipeKwargs``, ``TERecipeKwargs``, ...)."""

    def prepare(self, objects: list[object]) -> list[object]:
        """Convert every model of ``objects`` not yet converted (see :meth:`convert`)."""
        for obj in objects:
            if isinstance(obj, torch.nn.Module) and not getattr(obj, "_accel_fp8", False):
                self.convert(obj, objects)
        return objects

    def convert(self, model: torch.nn.Module, objects: list[object]) -> None:
        """Turn ``model``'s layers into this backend's FP8 layers (``objects``: the prepare call)."""
        raise NotImplementedError

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Convert ``model`` if :meth:`prepare` did not (``evaluation_mode``), then wrap its forward."""
        if not getattr(model, "_accel_fp8", False):
            self.prepare([model])
        return super().wrap_model(model)


class AOPrecision(FP8Precision):
    """torchao float8 training: ``nn.Linear`` layers become ``Float8Linear`` (parameters kept)."""

    fp8_backend = "AO"
    recipe: AORecipeKwargs

    def convert(self, model: torch.nn.Module, objects: list[object]) -> None:
        """``convert_model_to_fp8_ao`` with the recipe's config and module filter."""
        from .ao import convert_model_to_fp8_ao, default_config, precompute_scales_after_step

        recipe = self.recipe
        all_gather = recipe.enable_fsdp_float8_all_gather
        if all_gather is None:
            all_gather = _fsdp_version(self.context) == 2
        pad = recipe.pad_inner_dim
        assert pad is not None  # filled by the recipe's __post_init__
        config = recipe.config or default_config(pad, all_gather)
        convert_model_to_fp8_ao(model, config, recipe.module_filter_func)
        vars(model)["_accel_fp8"] = True  # a plain attribute, the mark of a converted model
        if getattr(config, "enable_fsdp_float8_all_gather", False):
            for obj in objects:
                if isinstance(obj, torch.optim.Optimizer):
                    precompute_scales_after_step(obj, model)


class TEPrecision(FP8Precision):
    """TransformerEngine: ``nn.Linear`` / ``nn.LayerNorm`` become TE modules (the optimizers of
    the same prepare call are re-pointed at them) and the forward runs under TE's FP8 autocast
    with the recipe, disabled in ``eval()`` mode unless ``use_autocast_during_eval``."""

    fp8_backend = "TE"
    recipe: TERecipeKwargs

    def __init__(
        self, name: str, device: torch.device, handlers: dict[str, KwargsHandler] | None = None
    ) -> None:
        super().__init__(name, device, handlers)
        _require_fp8_hardware()
        from .te import build_recipe

        self.te_recipe = build_recipe(self.recipe)
        """The ``transformer_engine.common.recipe.DelayedScaling`` used in the forward."""

    def convert(self, model: torch.nn.Module, objects: list[object]) -> None:
        """Swap ``model``'s layers for TE's and re-point the optimizers of ``objects`` at them."""
        from .te import convert_model, repoint_optimizers

        old = dict(model.named_parameters())
        convert_model(model, device=self.device)
        vars(model)["_accel_fp8"] = True
        optimizers = [o for o in objects if isinstance(o, torch.optim.Optimizer)]
        repoint_optimizers(optimizers, old, dict(model.named_parameters()))

    @contextlib.contextmanager
    def forward_context(self, model: torch.nn.Module) -> Generator[None, None, None]:
        """bf16 autocast plus TE's FP8 autocast (enabled in training, or always with
        ``use_autocast_during_eval``)."""
        from .te import fp8_autocast

        enabled = model.training or bool(self.recipe.use_autocast_during_eval)
        with self.autocast(), fp8_autocast(enabled, self.te_recipe):
            yield


class MSAMPPrecision(FP8Precision, FP16Precision):
    """MS-AMP: ``msamp.initialize(model, optimizer, opt_level)`` on the model and the optimizer
    of one prepare call; bf16 autocast with a dynamic ``GradScaler`` (as Accelerate does)."""

    fp8_backend = "MSAMP"
    recipe: MSAMPRecipeKwargs
    dtype = torch.bfloat16

    def bind(self, context: PrecisionContext) -> None:
        """Refuse the training strategies MS-AMP does not run under (FSDP, DeepSpeed, Megatron-LM)."""
        kind = _distributed_type(context)
        if kind in STRATEGY_TYPES:
            raise NotImplementedError(
                f"MS-AMP with {kind} is not supported by accel-fp8: use one process or DDP, "
                "or another FP8 backend (te, ao)"
            )
        super().bind(context)

    def prepare(self, objects: list[object]) -> list[object]:
        """Replace the model and the optimizer by ``msamp.initialize``'s."""
        from .ms_amp import initialize

        if any(getattr(o, "_accel_fp8", False) for o in objects):
            return objects
        opt_level = self.recipe.opt_level
        assert opt_level is not None  # filled by the recipe's __post_init__
        result = initialize(objects, opt_level)
        for obj in result:
            if isinstance(obj, torch.nn.Module):
                setattr(obj, "_accel_fp8", True)  # noqa: B010 (Module.__setattr__ takes no bool)
        return result

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """bf16 autocast only: MS-AMP casts a model together with its optimizer, in :meth:`prepare`."""
        return BF16Precision.wrap_model(self, model)


_BACKEND_CLASSES: dict[str, type[FP8Precision]] = {
    "AO": AOPrecision,
    "TE": TEPrecision,
    "MSAMP": MSAMPPrecision,
}


class _FSDPPluginView(Protocol):
    """What :func:`_fsdp_version` reads of an FSDP plugin object."""

    fsdp_version: int


def _distributed_type(context: PrecisionContext | None) -> str:
    """The run's distributed type, read from the precision's context (``NO`` without one)."""
    return str(context.distributed_type) if context is not None else "NO"


def _fsdp_version(context: PrecisionContext | None) -> int | None:
    """FSDP's version when training with FSDP (the plugin's, else the launched config's), else None."""
    if context is None or _distributed_type(context) != "FSDP":
        return None
    # the FSDP plugin (accel-fsdp's), read through the one field used here
    plugin = cast("_FSDPPluginView | None", context.plugins.get("fsdp_plugin"))
    if plugin is not None:
        return int(plugin.fsdp_version)
    from accel.config.launched import launched_config

    return int((launched_config().get("fsdp_config") or {}).get("fsdp_version", 2))


def _require_fp8_hardware() -> None:
    import transformer_engine.pytorch as te

    check = getattr(te, "is_fp8_available", None)
    if check is not None:
        ok, reason = check(return_reason=True)
    else:
        from transformer_engine.pytorch.fp8 import check_fp8_support

        ok, reason = check_fp8_support()
    if not ok:
        raise RuntimeError(f"TransformerEngine cannot run FP8 on this machine: {reason}")
