"""Memory helpers: ``find_executable_batch_size``, ``release_memory``, device cache clearing."""

from __future__ import annotations

import functools
import gc
import inspect
import re
from collections.abc import Callable
from typing import Any

import torch

from accel.logging import get_logger

logger = get_logger(__name__)

# Allocators that raise a plain RuntimeError instead of torch.OutOfMemoryError.
_OOM_MESSAGES = (
    "MPS backend out of memory",
    "DefaultCPUAllocator: can't allocate memory",
    "CUDNN_STATUS_NOT_SUPPORTED.",
    "XPU out of memory",
)


def clear_device_cache(garbage_collection: bool = False) -> None:
    """Free cached memory of the accelerator in use."""
    if garbage_collection:
        gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    elif hasattr(torch, "xpu") and torch.xpu.is_available():
        torch.xpu.empty_cache()
    elif torch.backends.mps.is_available():
        torch.mps.empty_cache()


def release_memory(*objects: Any) -> list[None]:
    """Drop references to ``objects`` and clear the cache; use as ``a, b = release_memory(a, b)``."""
    objects = list(objects)
    for index in range(len(objects)):
        objects[index] = None
    clear_device_cache(garbage_collection=True)
    return objects  # type: ignore[return-value]


def should_reduce_batch_size(exception: BaseException) -> bool:
    """Whether ``exception`` means "out of memory" (by type; by message only for allocators without one)."""
    if isinstance(exception, torch.OutOfMemoryError):
        return True
    return (
        isinstance(exception, RuntimeError)
        and len(exception.args) == 1
        and any(m in str(exception.args[0]) for m in _OOM_MESSAGES)
    )


def find_executable_batch_size(
    function: Callable | None = None,
    starting_batch_size: int = 128,
    reduce_batch_size_fn: Callable[[int], int] | None = None,
) -> Callable:
    """Decorator: call ``function(batch_size, ...)``, halving ``batch_size`` after each out-of-memory error.

    Each retry is logged with the batch size it moves to; at zero it raises.
    """
    if function is None:
        return functools.partial(
            find_executable_batch_size,
            starting_batch_size=starting_batch_size,
            reduce_batch_size_fn=reduce_batch_size_fn,
        )
    reduce = reduce_batch_size_fn or (lambda size: size // 2)

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        batch_size = starting_batch_size
        clear_device_cache(garbage_collection=True)
        params = list(inspect.signature(function).parameters)
        if len(params) < len(args) + 1:
            given = ", ".join(f"{p}={a}" for p, a in zip(params[1:], args, strict=False))
            raise TypeError(
                f"Batch size was passed into `{function.__name__}` as the first argument when called. "
                f"Remove this as the decorator already does so: `{function.__name__}({given})`"
            )
        while True:
            if batch_size == 0:
                raise RuntimeError("No executable batch size found, reached zero.")
            try:
                return function(batch_size, *args, **kwargs)
            except Exception as exc:
                if not should_reduce_batch_size(exc):
                    raise
                clear_device_cache(garbage_collection=True)
                new_size = reduce(batch_size)
                logger.warning(
                    f"out of memory with batch_size={batch_size} ({type(exc).__name__}); retrying with batch_size={new_size}",
                    main_process_only=False,
                )
                batch_size = new_size

    return wrapper


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
