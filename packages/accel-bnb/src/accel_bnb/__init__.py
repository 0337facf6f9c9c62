"""accel-bnb: bitsandbytes 8-bit and 4-bit quantization for accel.

    from accel import init_empty_weights
    from accel.utils import BnbQuantizationConfig, load_and_quantize_model

Names are imported on first use, so ``import accel_bnb`` loads neither torch nor bitsandbytes.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    "BnbQuantizationConfig": "accel_bnb.config",
    "BnbQuantizer": "accel_bnb.quantizer",
    "MemoryReport": "accel_bnb.memory",
    "memory_report": "accel_bnb.memory",
    "get_memory_footprint": "accel_bnb.memory",
    "default_skip_modules": "accel_bnb.replace",
    "replace_with_bnb_layers": "accel_bnb.replace",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'accel_bnb' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return __all__
