"""The user's model under accel's wrappers: unwrapping DDP-like wrappers and compilation, regional compilation."""

from __future__ import annotations

import types
from typing import Any

import torch

_WRAPPER_ATTRS = ("module",)


def _is_parallel_wrapper(model: Any) -> bool:
    from torch.nn.parallel import DataParallel, DistributedDataParallel

    return isinstance(model, (DistributedDataParallel, DataParallel)) or getattr(
        model, "_accel_wrapper", False
    )


def _held(wrapper: torch.nn.Module, name: str) -> torch.nn.Module:
    """The module a wrapper holds as ``name`` (DDP's ``module``, torch.compile's ``_orig_mod``)."""
    inner = getattr(wrapper, name)
    if not isinstance(inner, torch.nn.Module):
        raise TypeError(f"{type(wrapper).__name__}.{name} is not a torch.nn.Module")
    return inner


def _compiled(module: torch.nn.Module, compile_kwargs: dict[str, Any]) -> torch.nn.Module:
    """``torch.compile(module)``: an ``OptimizedModule``, a module itself."""
    compiled = torch.compile(module, **compile_kwargs)
    assert isinstance(compiled, torch.nn.Module)
    return compiled


def extract_model_from_parallel(
    model: torch.nn.Module,
    keep_fp32_wrapper: bool = True,
    keep_torch_compile: bool = True,
    recursive: bool = False,
) -> torch.nn.Module:
    """The user's model inside DDP-like wrappers, FSDP1 and ``torch.compile``.

    With ``keep_torch_compile`` a compiled model is returned compiled, with the parallel
    wrapper removed inside it (``torch.compile(DDP(model))`` gives
    ``torch.compile(model)``, as in Accelerate). With ``keep_fp32_wrapper=False`` the mixed-precision forward wrapper is removed too.
    With ``recursive`` the submodules are unwrapped as well, in place: every nested
    parallel wrapper (FSDP1 units of an auto-wrapped model, XLA's FSDP wrappers: a
    ``*DataParallel`` module with a ``module``) is replaced by the module it wraps
    (transformers' Trainer does this to drop FSDP from a model after training). FSDP2
    shards modules in place, so there is nothing to unwrap.
    """
    import sys

    fsdp_module = sys.modules.get("torch.distributed.fsdp")  # FSDP1 models exist only once imported
    fsdp1 = getattr(fsdp_module, "FullyShardedDataParallel", None) if fsdp_module else None

    def is_wrapper(module: Any) -> bool:
        return _is_parallel_wrapper(module) or (fsdp1 is not None and isinstance(module, fsdp1))

    compiled = None
    if hasattr(model, "_orig_mod"):
        compiled = model
        model = _held(model, "_orig_mod")
    while is_wrapper(model):
        model = _held(model, "module")
    if hasattr(model, "_orig_mod"):
        compiled = compiled or model
        model = _held(model, "_orig_mod")
    if recursive:

        def nested_wrapper(module: Any) -> bool:
            return is_wrapper(module) or (
                "DataParallel" in type(module).__name__
                and isinstance(getattr(module, "module", None), torch.nn.Module)
            )

        def unwrap_all(module: torch.nn.Module) -> torch.nn.Module:
            while nested_wrapper(module):
                module = _held(module, "module")
            for name, child in list(module.named_children()):
                inner = unwrap_all(child)
                if inner is not child:
                    setattr(module, name, inner)
            return module

        model = unwrap_all(model)
    if not keep_fp32_wrapper:
        forward = model.__dict__.get("forward")
        original = getattr(forward, "_accel_original_forward", None)
        if original is not None:
            if getattr(forward, "_accel_original_is_function", False):
                # the wrapped forward was a method: bind its function to this very model
                original = types.MethodType(original, model)
            model.forward = original
            if (
                getattr(original, "__self__", None) is model
                and original.__func__ is type(model).forward
            ):
                del model.__dict__["forward"]
    if keep_torch_compile and compiled is not None:
        if (
            compiled._orig_mod is not model
        ):  # torch.compile(DDP(model)): unwrap inside the compiled module
            compiled._orig_mod = model
        return compiled
    return model


def get_model_tp_size(model: Any) -> int | None:
    """The tensor-parallel degree a transformers model was sharded with, or None.

    transformers < 5 sets ``model.tp_size``; transformers >= 5 leaves it None and keeps the
    degree in ``model.config.distributed_config`` (an object, or a dict after a JSON round trip).
    """
    size = getattr(model, "tp_size", None)
    if size is not None:
        return size
    distributed = getattr(getattr(model, "config", None), "distributed_config", None)
    if isinstance(distributed, dict):
        return distributed.get("tp_size")
    return getattr(distributed, "tp_size", None)


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
        return _compiled(model, compile_kwargs)

    def regions(module: torch.nn.Module) -> torch.nn.Module:
        if isinstance(module, torch.nn.ModuleList):
            return torch.nn.ModuleList(_compiled(block, compile_kwargs) for block in module)
        if not has_repeated_blocks(module):
            return _compiled(module, compile_kwargs)
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


def _compile_regions_in_place(model: torch.nn.Module, **compile_kwargs: Any) -> torch.nn.Module:
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


def is_compiled_module(module: Any) -> bool:
    """Whether ``module`` is the result of ``torch.compile`` (an ``OptimizedModule``)."""
    return hasattr(torch, "_dynamo") and isinstance(
        module, torch._dynamo.eval_frame.OptimizedModule
    )


def has_compiled_regions(module: Any) -> bool:
    """Whether some submodule of ``module`` is compiled: an ``OptimizedModule`` (what
    :func:`compile_regions` makes) or compiled in place (``Module.compile``, ``prepare``'s
    regional compilation)."""
    if not isinstance(module, torch.nn.Module):
        return False
    return any(
        getattr(m, "_compiled_call_impl", None) is not None or is_compiled_module(m)
        for m in module.modules()
    )
