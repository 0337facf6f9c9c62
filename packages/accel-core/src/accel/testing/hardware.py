"""Hardware for tests: ``get_backend`` and skip decorators for tests that need specific devices."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def get_backend() -> tuple[str, int, Callable[[], int]]:
    """``(device_type, device_count, memory_allocated_fn)`` of the best accelerator here (CPU otherwise)."""
    import torch

    if torch.cuda.is_available():
        return "cuda", torch.cuda.device_count(), torch.cuda.memory_allocated
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return "xpu", torch.xpu.device_count(), torch.xpu.memory_allocated
    if torch.backends.mps.is_available():
        return "mps", 1, torch.mps.current_allocated_memory
    return "cpu", 1, lambda: 0


def _skip_unless(condition: bool, reason: str) -> Callable[[T], T]:
    import unittest

    return unittest.skipUnless(condition, reason)


def require_cuda(test: T) -> T:
    """Skip ``test`` unless a CUDA GPU is present."""
    import torch

    return _skip_unless(torch.cuda.is_available(), "needs a CUDA GPU")(test)


def require_multi_gpu(test: T) -> T:
    """Skip ``test`` unless at least two CUDA GPUs are present."""
    import torch

    return _skip_unless(torch.cuda.device_count() > 1, "needs two or more CUDA GPUs")(test)
