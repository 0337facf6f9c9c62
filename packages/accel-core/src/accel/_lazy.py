"""Lazy re-exports: names owned by plugins, imported from the plugin only when first used."""

from __future__ import annotations

import importlib
from typing import Any

from .errors import MissingPluginError

PLUGIN_NAMES: dict[str, tuple[str, str]] = {
    # name: (module to import it from, distribution to install)
    "DDPCommunicationHookType": ("accel_ddp", "accel-ddp"),
    "DistributedDataParallelKwargs": ("accel_ddp", "accel-ddp"),
    "LocalSGD": ("accel_ddp", "accel-ddp"),
    "FullyShardedDataParallelPlugin": ("accel_fsdp", "accel-fsdp"),
    "DeepSpeedPlugin": ("accel_deepspeed", "accel-deepspeed"),
    "DummyOptim": ("accel_deepspeed", "accel-deepspeed"),
    "DummyScheduler": ("accel_deepspeed", "accel-deepspeed"),
    "HfDeepSpeedConfig": ("accel_deepspeed", "accel-deepspeed"),
    "MegatronLMPlugin": ("accel_megatron", "accel-megatron"),
    "MegatronLMDummyScheduler": ("accel_megatron", "accel-megatron"),
    "MegatronLMDummyDataLoader": ("accel_megatron", "accel-megatron"),
    "FP8RecipeKwargs": ("accel_fp8", "accel-fp8"),
    "AORecipeKwargs": ("accel_fp8", "accel-fp8"),
    "TERecipeKwargs": ("accel_fp8", "accel-fp8"),
    "MSAMPRecipeKwargs": ("accel_fp8", "accel-fp8"),
    "BnbQuantizationConfig": ("accel_bnb", "accel-bnb"),
    "ProfileKwargs": ("accel_profiler", "accel-profiler"),
}
"""Every plugin-owned name that ``accel`` / ``accel.utils`` re-export."""


def plugin_attribute(name: str, module_name: str, package: str) -> Any:
    """``module_name.name``, or an ImportError naming ``package`` when it is not installed."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name.split(".")[0]:
            raise
        raise MissingPluginError(name, package) from None
    return getattr(module, name)


def resolve(name: str) -> Any:
    """Look ``name`` up among plugin-owned names and names exported through ``accel_exports``."""
    if name in PLUGIN_NAMES:
        module_name, package = PLUGIN_NAMES[name]
        return plugin_attribute(name, module_name, package)
    from . import registry

    target = registry.exports().get(name)
    if target is not None:
        module_name, _, attribute = target.partition(":")
        return getattr(importlib.import_module(module_name), attribute or name)
    raise AttributeError(name)
