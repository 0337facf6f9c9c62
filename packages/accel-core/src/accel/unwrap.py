"""Unwrapping a prepared model: the user's module inside DDP-like wrappers, FSDP1 and ``torch.compile``,
and the tensor-parallel degree a transformers model was sharded with."""

from __future__ import annotations

import types

import torch


def _is_parallel_wrapper(model: object) -> bool:
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

    def is_wrapper(module: object) -> bool:
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

        def nested_wrapper(module: object) -> bool:
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


def get_model_tp_size(model: object) -> int | None:
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
