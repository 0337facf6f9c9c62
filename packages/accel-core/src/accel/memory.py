"""Memory helpers: ``find_executable_batch_size``, ``release_memory``, device cache clearing."""

from __future__ import annotations

import functools
import gc
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from accel.logging import get_logger

if TYPE_CHECKING:
    from accel.types import CustomDtype

logger = get_logger(__name__)

# What out-of-memory errors say when they are raised as a plain RuntimeError (the
# allocators of CUDA/HIP/XPU/MPS, cuDNN, the CPU allocator, Gaudi's device memory).
_OOM_MESSAGES = (
    " out of memory.",
    "MPS backend out of memory",
    "CUDNN_STATUS_NOT_SUPPORTED.",
    "DefaultCPUAllocator: can't allocate memory",
    "FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed",
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


def release_memory(*objects: object) -> list[None]:
    """Drop references to ``objects`` and clear the cache; use as ``a, b = release_memory(a, b)``."""
    count = len(objects)
    del objects  # the references this call holds
    clear_device_cache(garbage_collection=True)
    return [None] * count


def should_reduce_batch_size(exception: BaseException) -> bool:
    """Whether ``exception`` means "out of memory".

    ``torch.OutOfMemoryError``, or a ``RuntimeError`` whose message is one of the
    out-of-memory messages Accelerate recognises (``"CUDA out of memory."`` and the
    other `` out of memory.`` allocators, cuDNN's ``CUDNN_STATUS_NOT_SUPPORTED.``, the
    CPU allocator's ``can't allocate memory``, Gaudi's ``PT_DEVMEM Allocation failed``).
    """
    if isinstance(exception, torch.OutOfMemoryError):
        return True
    return (
        isinstance(exception, RuntimeError)
        and len(exception.args) == 1
        and isinstance(exception.args[0], str)
        and any(m in exception.args[0] for m in _OOM_MESSAGES)
    )


def _reducer(reduce_batch_size_fn: Callable | None) -> Callable[[int], int]:
    """``size -> new size`` from a user's function taking no argument (Accelerate) or the size."""
    if reduce_batch_size_fn is None:
        return lambda size: int(size * 0.9)
    try:
        wanted = [
            p
            for p in inspect.signature(reduce_batch_size_fn).parameters.values()
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):  # no signature (some builtins): Accelerate's form
        wanted = []
    if wanted:
        return lambda size: int(reduce_batch_size_fn(size))
    return lambda size: int(reduce_batch_size_fn())


def find_executable_batch_size(
    function: Callable | None = None,
    starting_batch_size: int = 128,
    reduce_batch_size_fn: Callable[[int], int] | None = None,
) -> Callable:
    """Decorator: call ``function(batch_size, ...)``, reducing ``batch_size`` after each out-of-memory error.

    By default the batch size is multiplied by 0.9 (``int(size * 0.9)``), as in
    Accelerate 1.15. ``reduce_batch_size_fn`` chooses the next size: as in Accelerate,
    a callable taking no argument that returns the new batch size (it keeps its own
    count); a callable taking one argument receives the size that failed, so
    ``reduce_batch_size_fn=lambda size: size // 2`` halves it (fewer retries: see
    docs/design.md). Out-of-memory errors are those :func:`should_reduce_batch_size` accepts;
    any other error propagates. Each retry is logged with the batch size it moves to;
    at zero it raises.
    """
    if function is None:
        return functools.partial(
            find_executable_batch_size,
            starting_batch_size=starting_batch_size,
            reduce_batch_size_fn=reduce_batch_size_fn,
        )
    reduce = _reducer(reduce_batch_size_fn)

    @functools.wraps(function)
    def wrapper(*args: object, **kwargs: object) -> object:
        batch_size = starting_batch_size
        clear_device_cache(garbage_collection=True)
        params = list(inspect.signature(function).parameters)
        if len(params) < len(args) + 1:
            given = ", ".join(f"{p}={a}" for p, a in zip(params[1:], args, strict=False))
            name = getattr(function, "__name__", "the function")
            raise TypeError(
                f"Batch size was passed into `{name}` as the first argument when called. "
                f"Remove this as the decorator already does so: `{name}({given})`"
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


def dtype_byte_size(dtype: torch.dtype | CustomDtype) -> float:
    """Bytes one element of ``dtype`` takes (``0.125`` for ``torch.bool``, ``0.5`` for 4-bit types).

    Also :class:`accel.types.CustomDtype`: ``INT2`` 0.25, ``INT4`` 0.5, ``FP8`` 1.
    """
    from accel.types import CustomDtype

    if isinstance(dtype, CustomDtype):
        return {CustomDtype.INT2: 0.25, CustomDtype.INT4: 0.5, CustomDtype.FP8: 1.0}[dtype]
    if dtype == torch.bool:
        return 1 / 8
    if dtype in (
        getattr(torch, "quint4x2", None),
        getattr(torch, "int4", None),
        getattr(torch, "uint4", None),
    ):
        return 0.5
    if dtype.is_floating_point or dtype.is_complex:
        return torch.finfo(dtype).bits / 8 if not dtype.is_complex else dtype.itemsize
    return dtype.itemsize
