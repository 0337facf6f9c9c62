"""Entry-point module of accel-fp8: the ``fp8`` precision, exports, the ``fp8_config`` section,
``accel launch --fp8_*`` flags and ``accel config`` questions. Imports neither torch nor any
FP8 library."""

from __future__ import annotations

from typing import Any

from accel.hookspecs import hookimpl

_EXPORTS = {
    "FP8RecipeKwargs": "accel_fp8.recipes",
    "TERecipeKwargs": "accel_fp8.recipes",
    "MSAMPRecipeKwargs": "accel_fp8.recipes",
    "AORecipeKwargs": "accel_fp8.recipes",
    "is_fp8_available": "accel_fp8.availability",
    "is_torchao_available": "accel_fp8.availability",
    "is_transformer_engine_available": "accel_fp8.availability",
    "is_msamp_available": "accel_fp8.availability",
    "convert_model_to_fp8_ao": "accel_fp8.ao",
    "has_ao_layers": "accel_fp8.ao",
    "has_transformer_engine_layers": "accel_fp8.te",
}


@hookimpl
def accel_precisions() -> list[type]:
    """``mixed_precision="fp8"`` (the backend is chosen when the Accelerator is built)."""
    from .precision import FP8Precision

    return [FP8Precision]


@hookimpl
def accel_exports() -> dict[str, str]:
    """The recipe kwargs handlers and FP8 helpers, under ``accel`` and ``accel.utils``."""
    return {name: f"{module}:{name}" for name, module in _EXPORTS.items()}


@hookimpl
def accel_config_sections() -> dict[str, Any]:
    """The ``fp8_config`` section, declared in :data:`accel_fp8.config.FP8_SECTION`."""
    from .config import FP8_SECTION

    return {FP8_SECTION.key: FP8_SECTION}


@hookimpl
def accel_launch_arguments(parser: Any) -> None:
    """``--fp8_backend``, ``--fp8_opt_level``, ... (into the ``fp8_config`` section)."""
    from .config import FP8_SECTION

    FP8_SECTION.add_arguments(parser)


@hookimpl
def accel_config_questions(ask: Any, config: dict) -> None:
    """``accel config`` FP8 questions, asked when mixed precision is ``fp8``."""
    if config.get("mixed_precision") != "fp8":
        return
    from .questions import ask_fp8

    config["fp8_config"] = ask_fp8(ask, config)


@hookimpl
def accel_env_info() -> dict[str, str]:
    """The FP8 libraries installed (versions from package metadata, nothing imported)."""
    from importlib import metadata

    found = []
    for label, dist in (
        ("torchao", "torchao"),
        ("TransformerEngine", "transformer-engine"),
        ("MS-AMP", "msamp"),
    ):
        try:
            found.append(f"{label} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            found.append(f"{label} not installed")
    return {"FP8 libraries (accel-fp8)": ", ".join(found)}
