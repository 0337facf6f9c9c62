"""Which submodules become their own FSDP unit (auto-wrap policies), for FSDP2 and FSDP1."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable

import torch

from .config import FullyShardedDataParallelPlugin


def layer_classes(
    model: torch.nn.Module, plugin: FullyShardedDataParallelPlugin
) -> set[type[torch.nn.Module]]:
    """Classes named by ``transformer_cls_names_to_wrap`` (else the model's ``_no_split_modules``)."""
    names = set(
        plugin.transformer_cls_names_to_wrap or getattr(model, "_no_split_modules", None) or []
    )
    found = {type(m) for m in model.modules() if type(m).__name__ in names}
    missing = names - {cls.__name__ for cls in found}
    if missing:
        raise ValueError(
            f"fsdp_transformer_layer_cls_to_wrap names {sorted(missing)}, which the model does not contain "
            f"(it has {sorted({type(m).__name__ for m in model.modules()})[:12]}...)"
        )
    return found


def units_to_shard(
    model: torch.nn.Module, plugin: FullyShardedDataParallelPlugin
) -> list[torch.nn.Module]:
    """Submodules (not the root) to shard as separate units, children before parents."""
    policy = plugin.auto_wrap_policy
    if policy is None:
        policy = (
            "TRANSFORMER_BASED_WRAP"
            if (plugin.transformer_cls_names_to_wrap or getattr(model, "_no_split_modules", None))
            else "NO_WRAP"
        )
    if policy == "NO_WRAP":
        return []
    minimum = plugin.min_num_params if plugin.min_num_params is not None else 100_000_000
    if callable(policy):
        func = policy.func if isinstance(policy, functools.partial) else policy
        keywords = policy.keywords if isinstance(policy, functools.partial) else {}
        from torch.distributed.fsdp.wrap import (
            size_based_auto_wrap_policy,
            transformer_auto_wrap_policy,
        )

        if func is transformer_auto_wrap_policy:  # from set_auto_wrap_policy, or the user's own
            classes = tuple(keywords.get("transformer_layer_cls") or ())
            return [m for m in _post_order(model) if m is not model and isinstance(m, classes)]
        if func is size_based_auto_wrap_policy:
            minimum = keywords.get("min_num_params", 100_000_000)
            policy = "SIZE_BASED_WRAP"
        elif _takes_recurse(policy):  # torch's FSDP1 signature (module, recurse, nonwrapped_numel)
            return [
                m
                for m in _post_order(model)
                if m is not model
                and policy(
                    module=m,
                    recurse=False,
                    nonwrapped_numel=sum(p.numel() for p in m.parameters()),
                )
            ]
        else:
            return [m for m in _post_order(model) if m is not model and policy(m)]
    if policy == "TRANSFORMER_BASED_WRAP":
        classes = tuple(layer_classes(model, plugin))
        return [m for m in _post_order(model) if m is not model and isinstance(m, classes)]
    chosen: list[torch.nn.Module] = []
    remaining: dict[int, int] = {}
    for module in _post_order(model):
        own = sum(p.numel() for p in module.parameters(recurse=False))
        total = own + sum(remaining[id(c)] for c in module.children())
        if module is not model and total >= minimum:
            chosen.append(module)
            total = 0
        remaining[id(module)] = total
    return chosen


def _takes_recurse(policy: Callable) -> bool:
    try:
        return "recurse" in inspect.signature(policy).parameters
    except (TypeError, ValueError):
        return False


def ignored_modules(
    model: torch.nn.Module, plugin: FullyShardedDataParallelPlugin
) -> list[torch.nn.Module] | None:
    """The plugin's ``ignored_modules`` as modules of ``model``; a string is a regular
    expression matched in full against the submodules' names (as in Accelerate)."""
    value = plugin.ignored_modules
    if value is None:
        return None
    return modules_named(model, value)


def modules_named(model: torch.nn.Module, modules: Iterable[torch.nn.Module] | str) -> list:
    """``modules`` as a list: a string is a regular expression that the submodules' names
    of ``model`` must match in full (``"lm_head|.*\\.router"``); other values are kept."""
    if isinstance(modules, str):
        pattern = re.compile(modules)
        return [m for name, m in model.named_modules() if pattern.fullmatch(name)]
    return list(modules)


def get_module_class_from_name(module: torch.nn.Module, name: str) -> type | None:
    """The class named ``name`` of ``module`` or of one of its submodules (the first met,
    depth first), or None. PEFT builds its FSDP wrap policy with it."""
    for submodule in module.modules():
        if type(submodule).__name__ == name:
            return type(submodule)
    return None


def get_parameters_from_modules(
    modules: Iterable[torch.nn.Module] | str | None,
    model: torch.nn.Module,
    device: torch.device | str | int,
) -> set[torch.nn.Parameter]:
    """The parameters of ``modules`` (FSDP2 leaves them unsharded: ``ignored_params``).

    ``modules`` is None (no parameters), modules, or a regular expression matched in full
    against the submodule names of ``model``; modules found by name are moved to ``device``
    first, as Accelerate does (TRL passes ``fsdp_plugin.ignored_modules`` here).
    """
    if modules is None:
        return set()
    found = modules_named(model, modules)
    if isinstance(modules, str):
        for module in found:
            module.to(device)
    return {param for module in found for param in module.parameters()}


def _post_order(module: torch.nn.Module) -> list[torch.nn.Module]:
    order: list[torch.nn.Module] = []
    for child in module.children():
        order.extend(_post_order(child))
    order.append(module)
    return order


def fsdp1_policy(model: torch.nn.Module, plugin: FullyShardedDataParallelPlugin) -> Callable | None:
    """The ``auto_wrap_policy`` argument of FSDP1 matching the plugin."""
    units = {id(m) for m in units_to_shard(model, plugin)}
    if not units:
        return None

    def policy(module: torch.nn.Module, recurse: bool, nonwrapped_numel: int) -> bool:
        return True if recurse else id(module) in units

    return functools.partial(policy)
