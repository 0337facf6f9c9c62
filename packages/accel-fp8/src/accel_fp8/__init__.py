"""accel-fp8: ``mixed_precision="fp8"`` through torchao, TransformerEngine or MS-AMP.

Importing this package imports neither torch nor any FP8 library.
"""

from __future__ import annotations

from .availability import (
    FP8BackendError,
    is_fp8_available,
    is_msamp_available,
    is_torchao_available,
    is_transformer_engine_available,
)
from .recipes import AORecipeKwargs, FP8RecipeKwargs, MSAMPRecipeKwargs, TERecipeKwargs

__all__ = [
    "AORecipeKwargs",
    "FP8BackendError",
    "FP8RecipeKwargs",
    "MSAMPRecipeKwargs",
    "TERecipeKwargs",
    "is_fp8_available",
    "is_msamp_available",
    "is_torchao_available",
    "is_transformer_engine_available",
]
