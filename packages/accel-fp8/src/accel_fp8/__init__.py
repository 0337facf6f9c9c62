"""accel-fp8: ``mixed_precision="fp8"`` through torchao, TransformerEngine or MS-AMP.

Importing this package imports neither torch nor any FP8 library; names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports

if TYPE_CHECKING:  # what type checkers and editors follow; at run time names load on first use
    from accel_fp8.ao import convert_model_to_fp8_ao as convert_model_to_fp8_ao
    from accel_fp8.ao import has_ao_layers as has_ao_layers
    from accel_fp8.availability import FP8BackendError as FP8BackendError
    from accel_fp8.availability import is_fp8_available as is_fp8_available
    from accel_fp8.availability import is_msamp_available as is_msamp_available
    from accel_fp8.availability import is_torchao_available as is_torchao_available
    from accel_fp8.availability import (
        is_transformer_engine_available as is_transformer_engine_available,
    )
    from accel_fp8.recipes import AORecipeKwargs as AORecipeKwargs
    from accel_fp8.recipes import FP8RecipeKwargs as FP8RecipeKwargs
    from accel_fp8.recipes import MSAMPRecipeKwargs as MSAMPRecipeKwargs
    from accel_fp8.recipes import TERecipeKwargs as TERecipeKwargs
    from accel_fp8.te import has_transformer_engine_layers as has_transformer_engine_layers

_NAMES = {
    "FP8BackendError": "accel_fp8.availability",
    "is_fp8_available": "accel_fp8.availability",
    "is_msamp_available": "accel_fp8.availability",
    "is_torchao_available": "accel_fp8.availability",
    "is_transformer_engine_available": "accel_fp8.availability",
    "AORecipeKwargs": "accel_fp8.recipes",
    "FP8RecipeKwargs": "accel_fp8.recipes",
    "MSAMPRecipeKwargs": "accel_fp8.recipes",
    "TERecipeKwargs": "accel_fp8.recipes",
    "convert_model_to_fp8_ao": "accel_fp8.ao",
    "has_ao_layers": "accel_fp8.ao",
    "has_transformer_engine_layers": "accel_fp8.te",
}
"""Public names and the module defining each, imported on first use (``accel launch`` imports
the plugin module without them)."""

__all__ = sorted(_NAMES)

__getattr__, __dir__ = exports(__name__, _NAMES)
