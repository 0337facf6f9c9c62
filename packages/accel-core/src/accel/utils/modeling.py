"""Model helpers: unwrapping, regional compilation, sizes, sharded safetensors files."""

from __future__ import annotations

import json
import os
import re
import types
from collections.abc import Iterable
from typing import Any

import torch

WEIGHTS_NAME = "pytorch_model.bin"
SAFE_WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "pytorch_model.bin.index.json"
SAFE_WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
ALIASES_KEY = "accel_aliases"
"""safetensors metadata key mapping each dropped tied name to the name kept for its storage."""

_WRAPPER_ATTRS = ("module",)


def _is_parallel_wrapper(model: Any) -> bool:
    from torch.nn.parallel import DataParallel, DistributedDataParallel

    return isinstance(model, (DistributedDataParallel, DataParallel)) or getattr(
        model, "_accel_wrapper", False
    )


def extract_model_from_parallel(
    model: torch.nn.Module, keep_fp32_wrapper: bool = True, keep_torch_compile: bool = True
) -> torch.nn.Module:
    """The user's model inside DDP-like wrappers and ``torch.compile``.

    With ``keep_fp32_wrapper=False`` the mixed-precision forward wrapper is removed too.
    """
    compiled = None
    if hasattr(model, "_orig_mod"):
        compiled = model
        model = model._orig_mod
    while _is_parallel_wrapper(model):
        model = model.module
    if hasattr(model, "_orig_mod"):
        compiled = compiled or model
        model = model._orig_mod
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
        return compiled
    return model


def has_repeated_blocks(model: torch.nn.Module) -> bool:
    """Whether ``model`` holds a ``ModuleList`` of blocks (what regional compilation targets)."""
    return any(isinstance(m, torch.nn.ModuleList) and len(m) > 0 for m in model.modules())


def compile_regions(model: torch.nn.Module, **compile_kwargs: Any) -> torch.nn.Module:
    """Compile each block of every ``ModuleList`` in place, and the model's leaves outside them.

    Blocks of the same shape reuse one compiled graph, so start-up is much faster than
    compiling the whole model; parameter names are unchanged.
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


def id_tensor_storage(tensor: torch.Tensor) -> tuple[Any, int, int]:
    """An identifier of the storage behind ``tensor`` (tensors sharing memory share it)."""
    if tensor.device.type == "meta":
        return (tensor.device, id(tensor), 0)
    storage = tensor.untyped_storage()
    return (tensor.device, storage.data_ptr(), storage.nbytes())


def split_aliases(
    state_dict: dict[str, torch.Tensor],
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Drop tensors that alias another entry (tied weights); return the rest and ``{dropped: kept}``."""
    seen: dict[Any, str] = {}
    kept: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    for name, tensor in state_dict.items():
        if not isinstance(tensor, torch.Tensor):
            continue
        key = id_tensor_storage(tensor) + (
            tensor.storage_offset(),
            tuple(tensor.shape),
            tensor.dtype,
        )
        if key in seen:
            aliases[name] = seen[key]
        else:
            seen[key] = name
            kept[name] = tensor.detach().contiguous()
    return kept, aliases


def parse_size(size: int | str) -> int:
    """``"10GB"`` / ``"500MiB"`` / int -> bytes."""
    if isinstance(size, int):
        return size
    match = re.fullmatch(r"\s*([\d.]+)\s*([KMGT]?i?B)?\s*", size.upper().replace("IB", "iB"))
    if not match:
        raise ValueError(
            f"max_shard_size={size!r}: use an int of bytes or a string like '10GB' or '500MB'"
        )
    number = float(match.group(1))
    unit = (match.group(2) or "B").upper()
    factor = {
        "B": 1,
        "KB": 10**3,
        "MB": 10**6,
        "GB": 10**9,
        "TB": 10**12,
        "KIB": 2**10,
        "MIB": 2**20,
        "GIB": 2**30,
        "TIB": 2**40,
    }[unit]
    return int(number * factor)


def shard_state_dict(
    state_dict: dict[str, torch.Tensor], max_shard_size: int | str
) -> list[dict[str, torch.Tensor]]:
    """Split ``state_dict`` in order into shards of at most ``max_shard_size`` bytes (a larger tensor gets its own)."""
    limit = parse_size(max_shard_size)
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in state_dict.items():
        nbytes = tensor.numel() * tensor.element_size()
        if shards[-1] and size + nbytes > limit:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += nbytes
    return shards


def save_weights(
    state_dict: dict[str, torch.Tensor],
    save_directory: str | os.PathLike,
    max_shard_size: int | str = "10GB",
    safe_serialization: bool = True,
    save_function: Any = None,
) -> list[str]:
    """Write ``state_dict`` as one file or as shards plus an index JSON; return the file names.

    Tied tensors are written once; their other names are recorded as aliases.
    """
    from safetensors.torch import save_file

    os.makedirs(save_directory, exist_ok=True)
    tensors, aliases = split_aliases(state_dict)
    tensors = {k: v.cpu() for k, v in tensors.items()}
    shards = shard_state_dict(tensors, max_shard_size)
    base = SAFE_WEIGHTS_NAME if safe_serialization else WEIGHTS_NAME
    stem, ext = base.rsplit(".", 1)
    names = (
        [base]
        if len(shards) == 1
        else [f"{stem}-{i + 1:05d}-of-{len(shards):05d}.{ext}" for i in range(len(shards))]
    )
    for name, shard in zip(names, shards):
        path = os.path.join(save_directory, name)
        if safe_serialization:
            save_file(shard, path, metadata={"format": "pt", ALIASES_KEY: json.dumps(aliases)})
        else:
            (save_function or torch.save)(
                {**shard, **{k: shard[v] for k, v in aliases.items() if v in shard}}, path
            )
    if len(shards) > 1:
        index = {
            "metadata": {
                "total_size": sum(t.numel() * t.element_size() for t in tensors.values()),
                ALIASES_KEY: aliases,
            },
            "weight_map": {k: n for n, shard in zip(names, shards) for k in shard},
        }
        index_name = SAFE_WEIGHTS_INDEX_NAME if safe_serialization else WEIGHTS_INDEX_NAME
        with open(os.path.join(save_directory, index_name), "w") as f:
            json.dump(index, f, indent=2, sort_keys=True)
            f.write("\n")
        names.append(index_name)
    return names


def load_weights(
    path: str | os.PathLike, device: str | torch.device = "cpu"
) -> dict[str, torch.Tensor]:
    """Read a file or directory written by :func:`save_weights` (tied names restored); never unpickles code."""
    from safetensors import safe_open

    path = os.fspath(path)
    if os.path.isdir(path):
        for index_name in (SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_INDEX_NAME):
            index_path = os.path.join(path, index_name)
            if os.path.exists(index_path):
                with open(index_path) as f:
                    index = json.load(f)
                result: dict[str, torch.Tensor] = {}
                for shard in sorted(set(index["weight_map"].values())):
                    result.update(load_weights(os.path.join(path, shard), device))
                for alias, target in index.get("metadata", {}).get(ALIASES_KEY, {}).items():
                    result[alias] = result[target]
                return result
        for name in (SAFE_WEIGHTS_NAME, WEIGHTS_NAME):
            if os.path.exists(os.path.join(path, name)):
                return load_weights(os.path.join(path, name), device)
        raise FileNotFoundError(f"no {SAFE_WEIGHTS_NAME} or {WEIGHTS_NAME} (or index) in {path}")
    if path.endswith(".safetensors"):
        result = {}
        with safe_open(path, framework="pt", device=str(device)) as f:
            for key in f.keys():
                result[key] = f.get_tensor(key)
            aliases = json.loads((f.metadata() or {}).get(ALIASES_KEY, "{}"))
        for alias, target in aliases.items():
            if target in result:
                result[alias] = result[target]
        return result
    return torch.load(path, map_location=device, weights_only=True)


def named_module_tensors(
    module: torch.nn.Module, include_buffers: bool = True, recurse: bool = False
) -> Iterable[tuple[str, torch.Tensor]]:
    """Parameters (and buffers) of ``module`` with their names."""
    yield from module.named_parameters(recurse=recurse)
    if include_buffers:
        yield from module.named_buffers(recurse=recurse)


# -- helpers for big-model inference (accel.big_modeling, accel.hooks) --------------------


def set_module_tensor_to_device(
    module: torch.nn.Module,
    tensor_name: str,
    device: int | str | torch.device,
    value: torch.Tensor | None = None,
    dtype: str | torch.dtype | None = None,
    non_blocking: bool = False,
) -> None:
    """Put the parameter or buffer ``tensor_name`` (dotted, e.g. ``"blocks.0.weight"``) on ``device``.

    With ``value`` the tensor is replaced by ``value`` (same shape); floating values are cast to
    ``dtype``, or to the current tensor's dtype when ``dtype`` is None, as ``load_state_dict``
    does. No copy is made when ``value`` already has the right device and dtype. A parameter
    stays a ``Parameter`` (``requires_grad`` kept); a meta tensor needs a ``value`` to leave
    the meta device.
    """
    owner = module
    prefix, _, name = tensor_name.rpartition(".")
    if prefix:
        owner = module.get_submodule(prefix)
    if name in owner._parameters:
        old, is_buffer = owner._parameters[name], False
    elif name in owner._buffers:
        old, is_buffer = owner._buffers[name], True
    else:
        raise ValueError(
            f"{type(module).__name__} has no parameter or buffer named {tensor_name!r}"
        )
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype.replace("torch.", ""))
    target = torch.device(device) if not isinstance(device, int) else _index_device(device)
    if value is None:
        if old is None:
            return
        if old.device.type == "meta" and target.type != "meta":
            raise ValueError(
                f"{tensor_name} is on the meta device (no data): pass value= to give it one, "
                "e.g. load a checkpoint with accel.load_checkpoint_in_model"
            )
        value = old
    elif old is not None and tuple(value.shape) != tuple(old.shape) and old.numel() > 0:
        raise ValueError(
            f"{tensor_name}: the value has shape {tuple(value.shape)} but the model expects "
            f"{tuple(old.shape)}"
        )
    if value.is_floating_point():
        if dtype is None and old is not None and old.is_floating_point():
            dtype = old.dtype
    else:
        dtype = None
    with torch.no_grad():
        new = value.to(device=target, dtype=dtype, non_blocking=non_blocking)
    if new is old:
        return
    if isinstance(new, torch.nn.Parameter):
        new = new.data
    if is_buffer:
        owner._buffers[name] = new
    else:
        requires_grad = bool(old.requires_grad) if old is not None else False
        owner._parameters[name] = torch.nn.Parameter(
            new, requires_grad=requires_grad and new.is_floating_point()
        )


def _index_device(index: int) -> torch.device:
    """The accelerator with number ``index`` (CUDA, XPU, NPU or MLU, whichever is present)."""
    for kind in ("cuda", "xpu", "npu", "mlu", "musa", "sdaa"):
        backend = getattr(torch, kind, None)
        available = getattr(backend, "is_available", None)
        if available is not None and available():
            count = backend.device_count()
            if index >= count:
                raise ValueError(
                    f"device index {index} does not exist: this machine has {count} {kind} device(s)"
                )
            return torch.device(kind, index)
    raise ValueError(
        f"device index {index} needs an accelerator (CUDA/XPU/NPU/MLU GPU) and none is available: "
        "use 'cpu' or 'disk' in the device map, or run on a machine with GPUs"
    )


def find_tied_parameters(model: torch.nn.Module) -> list[list[str]]:
    """Groups of parameter names that are one and the same ``Parameter`` (tied weights).

    Each group lists its names in the model's registration order, e.g.
    ``[["embed.weight", "lm_head.weight"]]``. Works on the meta device too.
    """
    groups: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(param), []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def retie_parameters(model: torch.nn.Module, tied_params: list[list[str]]) -> None:
    """Make every name of each group point at the group's first parameter again."""
    for group in tied_params:
        first = model.get_parameter(group[0])
        for name in group[1:]:
            prefix, _, attr = name.rpartition(".")
            owner = model.get_submodule(prefix) if prefix else model
            owner._parameters[attr] = first
