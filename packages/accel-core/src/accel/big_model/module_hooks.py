"""The hook mechanism: run code before and after a module's ``forward`` without subclassing.

:func:`add_hook_to_module` replaces ``module.forward`` by a wrapper that calls
``hook.pre_forward`` (which may change the arguments), the original forward, then
``hook.post_forward`` (which may change the output). :func:`remove_hook_from_module`
restores the original. :mod:`accel.big_model.hooks` (Accelerate's ``accelerate.hooks``)
builds device alignment and offloading on it and re-exports these names.
"""

from __future__ import annotations

import functools

import torch

from accel.big_model.modeling import retie_parameters

HOOK_ATTR = "_hf_hook"
"""Attribute holding a module's hook: Accelerate's name, which transformers, diffusers and PEFT read."""
OLD_FORWARD_ATTR = "_old_forward"
"""Attribute holding a hooked module's original ``forward`` (Accelerate's name)."""
TIED_ATTR = "_accel_tied_parameters"
"""Attribute of a dispatched model: its tied parameter groups, tied again when hooks are removed."""


class ModelHook:
    """Base class of hooks: every method is a no-op that subclasses override.

    ``no_grad = True`` runs the wrapped forward under ``torch.no_grad()``.
    """

    no_grad = False

    def init_hook(self, module: torch.nn.Module) -> torch.nn.Module:
        """Called once when the hook is attached; returns the module."""
        return module

    def pre_forward(
        self, module: torch.nn.Module, *args: object, **kwargs: object
    ) -> tuple[tuple[object, ...], dict[str, object]]:
        """Called before ``forward``; returns the (possibly changed) ``args`` and ``kwargs``."""
        return args, kwargs

    def post_forward(self, module: torch.nn.Module, output: object) -> object:
        """Called after ``forward``; returns the (possibly changed) output."""
        return output

    def detach_hook(self, module: torch.nn.Module) -> torch.nn.Module:
        """Called when the hook is removed; returns the module."""
        return module


class SequentialHook(ModelHook):
    """Several hooks as one: ``pre_forward`` in order, ``post_forward`` in reverse order."""

    def __init__(self, *hooks: ModelHook):
        self.hooks = list(hooks)

    @property
    def no_grad(self) -> bool:  # type: ignore[override]
        """True when any of the hooks asks for it."""
        return any(hook.no_grad for hook in self.hooks)

    def init_hook(self, module: torch.nn.Module) -> torch.nn.Module:
        """Initialise every hook in order."""
        for hook in self.hooks:
            module = hook.init_hook(module)
        return module

    def pre_forward(
        self, module: torch.nn.Module, *args: object, **kwargs: object
    ) -> tuple[tuple[object, ...], dict[str, object]]:
        """Each hook's ``pre_forward``, first to last."""
        for hook in self.hooks:
            args, kwargs = hook.pre_forward(module, *args, **kwargs)
        return args, kwargs

    def post_forward(self, module: torch.nn.Module, output: object) -> object:
        """Each hook's ``post_forward``, last to first."""
        for hook in reversed(self.hooks):
            output = hook.post_forward(module, output)
        return output

    def detach_hook(self, module: torch.nn.Module) -> torch.nn.Module:
        """Detach every hook, last to first."""
        for hook in reversed(self.hooks):
            module = hook.detach_hook(module)
        return module


def _hooked_forward(module: torch.nn.Module, *args: object, **kwargs: object) -> object:
    hook: ModelHook = getattr(module, HOOK_ATTR)
    args, kwargs = hook.pre_forward(module, *args, **kwargs)
    forward = getattr(module, OLD_FORWARD_ATTR)
    if hook.no_grad:
        with torch.no_grad():
            output = forward(*args, **kwargs)
    else:
        output = forward(*args, **kwargs)
    return hook.post_forward(module, output)


def _is_graph_module(module: torch.nn.Module) -> bool:
    # A torch.fx GraphModuleImpl whose instance ``forward`` is replaced stops seeing later
    # changes to its graph, so (as Accelerate does) its forward is swapped on the class.
    return "GraphModuleImpl" in str(type(module))


def add_hook_to_module(
    module: torch.nn.Module, hook: ModelHook, append: bool = False
) -> torch.nn.Module:
    """Attach ``hook`` to ``module`` (replacing its hook, or chained after it with ``append``).

    The hook is stored in ``module._hf_hook`` and the original forward in
    ``module._old_forward``, where Accelerate keeps them (transformers, diffusers and PEFT
    look there). Returns the module, whose ``forward`` now runs the hook around the original.
    """
    current = getattr(module, HOOK_ATTR, None)
    if append and current is not None:
        remove_hook_from_module(module)
        hook = SequentialHook(current, hook)
    elif current is not None:
        current.detach_hook(module)
    if not hasattr(module, OLD_FORWARD_ATTR):
        original = module.forward
        object.__setattr__(module, OLD_FORWARD_ATTR, original)
    else:
        original = getattr(module, OLD_FORWARD_ATTR)
    module = hook.init_hook(module)
    object.__setattr__(module, HOOK_ATTR, hook)
    wrapper = functools.partial(_hooked_forward, module)
    functools.update_wrapper(wrapper, original)
    if _is_graph_module(module):
        type(module).forward = wrapper
    else:
        module.forward = wrapper
    return module


def remove_hook_from_module(module: torch.nn.Module, recurse: bool = False) -> torch.nn.Module:
    """Detach the hook of ``module`` (and of all its submodules with ``recurse``), restoring ``forward``."""
    hook = module.__dict__.pop(HOOK_ATTR, None)
    if hook is not None:
        hook.detach_hook(module)
    original = module.__dict__.pop(OLD_FORWARD_ATTR, None)
    if original is not None:
        if _is_graph_module(module):
            type(module).forward = original
        elif (
            getattr(original, "__self__", None) is module
            and getattr(original, "__func__", None) is type(module).forward
        ):
            module.__dict__.pop("forward", None)
        else:
            module.forward = original
    for name in module.__dict__.pop("_accel_move_guard", ()):
        module.__dict__.pop(name, None)
    if recurse:
        for child in module.children():
            remove_hook_from_module(child, recurse=True)
    tied = module.__dict__.pop(TIED_ATTR, None)
    if tied:
        retie_parameters(module, tied)
    return module


def remove_hook_from_submodules(module: torch.nn.Module) -> None:
    """Detach the hooks of ``module`` and of every submodule (as ``remove_hook_from_module(recurse=True)``)."""
    remove_hook_from_module(module)
    for child in module.children():
        remove_hook_from_submodules(child)
