"""accel-megatron: Megatron-LM tensor, pipeline and sequence parallelism for accel, through megatron-core.

Names load on first use (:func:`accel.lazy.exports`): importing the package imports
neither torch nor megatron-core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports

if TYPE_CHECKING:  # what type checkers and editors follow; at run time names load on first use
    from accel_megatron.config import MegatronLMPlugin as MegatronLMPlugin
    from accel_megatron.data import MegatronLMDummyDataLoader as MegatronLMDummyDataLoader
    from accel_megatron.models import build_gpt_model as build_gpt_model
    from accel_megatron.scheduler import MegatronLMDummyScheduler as MegatronLMDummyScheduler

_NAMES = {
    "MegatronLMPlugin": "accel_megatron.config",
    "MegatronLMDummyScheduler": "accel_megatron.scheduler",
    "MegatronLMDummyDataLoader": "accel_megatron.data",
    "build_gpt_model": "accel_megatron.models",
}
"""Public names and the module defining each, imported on first use."""

__all__ = sorted(_NAMES)

__getattr__, __dir__ = exports(__name__, _NAMES)
