"""Compiling a model with ``torch.compile``: whole, regionally (block by block), and telling whether it is."""

from __future__ import annotations

import types
from typing import Any

import torch


def compile_module(module: torch.nn.Module, compile_kwargs: dict[str, Any]) -> torch.nn.Module:
    """``torch.compile(module)``: an ``OptimizedModule``, a module itself."""
    result = torch.compile(module, **compile_kwargs)
    assert isinstance(result, torch.nn.Module)
    return result


def has_repeated_blocks(model: torch.nn.Module) -> bool:
    """Whether ``model`` holds a ``ModuleList`` of blocks (what regional compilation targets)."""
    return any(isinstance(m, torch.nn.ModuleList) and len(m) > 0 for m in model.modules())


def compile_regions(model: torch.nn.Module, **compile_kwargs: Any) -> torch.nn.Module:
    """A twin of ``model`` whose repeated blocks are compiled one by one, as in Accelerate.

    Each block of every ``ModuleList`` becomes ``torch.compile(block)``, and each submodule
    outside the blocks that holds none is compiled whole; blocks of the same shape reuse one
    graph, so start-up is much faster than compiling the whole model. ``model`` is left as
    it was (the twin shares its parameters and keeps it as ``_orig_mod``); methods bound to
    ``model`` in its ``__dict__`` are bound to the twin. Without repeated blocks this is
    ``torch.compile(model)``.
    """
    if not has_repeated_blocks(model):
        return compile_module(model, compile_kwargs)

    def regions(module: torch.nn.Module) -> torch.nn.Module:
        if isinstance(module, torch.nn.ModuleList):
            return torch.nn.ModuleList(compile_module(block, compile_kwargs) for block in module)
        if not has_repeated_blocks(module):
            return compile_module(module, compile_kwargs)
        twin = type(module).__new__(type(module))
        twin.__dict__.update(module.__dict__)
        twin.__dict__["_parameters"] = dict(module._parameters)
        twin.__dict__["_buffers"] = dict(module._buffers)
        twin.__dict__["_non_persistent_buffers_set"] = set(module._non_persistent_buffers_set)
        twin.__dict__["_modules"] = {
            name: None if child is None else regions(child)
            for name, child in module._modules.items()
        }
        for name, value in list(twin.__dict__.items()):
            if isinstance(value, types.MethodType) and value.__self__ is module:
                twin.__dict__[name] = types.MethodType(value.__func__, twin)
        return twin

    compiled = regions(model)
    compiled.__dict__["_orig_mod"] = model
    return compiled


def compile_regions_in_place(model: torch.nn.Module, **compile_kwargs: Any) -> torch.nn.Module:
    """Compile each block of every ``ModuleList`` of ``model`` in place (``Module.compile``) and return it.

    What ``Accelerator.prepare`` does for regional compilation: the prepared model is the
    user's own, with its parameter names unchanged.
    """
    compiled_any = False
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList):
            for block in module:
                block.compile(**compile_kwargs)
                compiled_any = True
    if not compiled_any:
        model.compile(**compile_kwargs)
    return model


def is_compiled_module(module: object) -> bool:
    """Whether ``module`` is the result of ``torch.compile`` (an ``OptimizedModule``)."""
    return hasattr(torch, "_dynamo") and isinstance(
        module, torch._dynamo.eval_frame.OptimizedModule
    )


def has_compiled_regions(module: object) -> bool:
    """Whether some submodule of ``module`` is compiled: an ``OptimizedModule`` (what
    :func:`compile_regions` makes) or compiled in place (``Module.compile``, ``prepare``'s
    regional compilation)."""
    if not isinstance(module, torch.nn.Module):
        return False
    return any(
        getattr(m, "_compiled_call_impl", None) is not None or is_compiled_module(m)
        for m in module.modules()
    )
