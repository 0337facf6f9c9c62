"""accel-fp8: ``mixed_precision="fp8"`` through torchao, TransformerEngine or MS-AMP.

Importing this package imports neither torch nor any FP8 library; names load on first use.
"""

from __future__ import annotations

from accel.forwarding import module_attributes

_NAMES = {
    **dict.fromkeys(
        (
            "FP8BackendError",
            "is_fp8_available",
            "is_msamp_available",
            "is_torchao_available",
            "is_transformer_engine_available",
        ),
        "availability",
    ),
    **dict.fromkeys(
        ("AORecipeKwargs", "FP8RecipeKwargs", "MSAMPRecipeKwargs", "TERecipeKwargs"), "recipes"
    ),
}
"""Public names and their module, loaded on first use (``accel launch`` imports the plugin
module without them)."""

__all__ = sorted(_NAMES)


__getattr__ = module_attributes(__name__, _NAMES)
