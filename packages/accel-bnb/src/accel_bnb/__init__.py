"""accel-bnb: bitsandbytes 8-bit and 4-bit quantization for accel.

    from accel import init_empty_weights
    from accel.utils import BnbQuantizationConfig, load_and_quantize_model

Names are imported on first use, so ``import accel_bnb`` loads neither torch nor bitsandbytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports

if TYPE_CHECKING:  # what type checkers and editors follow; at run time names load on first use
    from accel_bnb.config import BnbQuantizationConfig as BnbQuantizationConfig
    from accel_bnb.memory import MemoryReport as MemoryReport
    from accel_bnb.memory import get_memory_footprint as get_memory_footprint
    from accel_bnb.memory import memory_report as memory_report
    from accel_bnb.quantizer import BnbQuantizer as BnbQuantizer
    from accel_bnb.replace import default_skip_modules as default_skip_modules
    from accel_bnb.replace import replace_with_bnb_layers as replace_with_bnb_layers

_NAMES = {
    "BnbQuantizationConfig": "accel_bnb.config",
    "BnbQuantizer": "accel_bnb.quantizer",
    "MemoryReport": "accel_bnb.memory",
    "memory_report": "accel_bnb.memory",
    "get_memory_footprint": "accel_bnb.memory",
    "default_skip_modules": "accel_bnb.replace",
    "replace_with_bnb_layers": "accel_bnb.replace",
}
"""Public names and the module defining each, imported on first use."""

__all__ = sorted(_NAMES)

__getattr__, __dir__ = exports(__name__, _NAMES)
