"""accel-megatron: Megatron-LM tensor, pipeline and sequence parallelism for accel, through megatron-core.

Names load on first use (module ``__getattr__``): importing the package imports
neither torch nor megatron-core.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    "MegatronLMPlugin": "config",
    "MegatronLMDummyScheduler": "scheduler",
    "MegatronLMDummyDataLoader": "data",
    "build_gpt_model": "models",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'accel_megatron' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
