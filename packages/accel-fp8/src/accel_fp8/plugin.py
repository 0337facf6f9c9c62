"""Entry-point module of accel-fp8: the ``fp8`` precision, exports, the ``fp8_config`` section,
``accel launch --fp8_*`` flags and ``accel config`` questions. Imports neither torch nor any
FP8 library."""

from __future__ import annotations

import argparse
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

FLAGS: dict[str, str] = {
    "backend": "FP8 backend: te (TransformerEngine), msamp (MS-AMP) or ao (torchao)",
    "fp8_format": "te: HYBRID (E4M3 forward, E5M2 backward) or E4M3",
    "margin": "te: margin of the scaling factor computation",
    "interval": "te: how often the scaling factor is recomputed (ignored by TransformerEngine)",
    "amax_history_len": "te: length of the amax history window",
    "amax_compute_algo": "te: max or most_recent",
    "override_linear_precision": "te: fprop,dgrad,wgrad GEMMs in higher precision, e.g. false,false,true",
    "opt_level": "msamp: O1 or O2",
    "pad_inner_dim": "ao: pad inner dimensions of FP8 GEMMs to multiples of 16 (true/false)",
    "enable_fsdp_float8_all_gather": "ao: all-gather FP8 weights with FSDP2 (true/false)",
}
"""``accel launch --fp8_<key>`` flags (``--fp8_format`` for ``fp8_format``) and their help."""


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
    """The ``fp8_config`` section and its validator."""
    from .config import validate_section

    return {"fp8_config": validate_section}


def _flag_type(key: str, flag: str) -> Any:
    from accel.errors import ConfigError

    from .config import SECTION_KEYS

    reader, _ = SECTION_KEYS[key]

    def parse(text: str) -> Any:
        try:
            reader(text, flag)
        except ConfigError as error:
            raise argparse.ArgumentTypeError(str(error).removeprefix(f"{flag}=")) from None
        return text

    return parse


@hookimpl
def accel_launch_arguments(parser: Any) -> None:
    """``--fp8_backend``, ``--fp8_opt_level``, ... (into the ``fp8_config`` section)."""
    for key, help_text in FLAGS.items():
        flag = key if key.startswith("fp8_") else f"fp8_{key}"
        parser.add_argument(
            f"--{flag}",
            dest=f"fp8_config.{key}",
            type=_flag_type(key, f"--{flag}"),
            default=None,
            metavar="VALUE",
            help=help_text,
        )
    parser.add_argument(
        "--fp8_use_autocast_during_eval",
        dest="fp8_config.use_autocast_during_eval",
        action="store_true",
        default=None,
        help="te: keep FP8 autocast on in eval() mode",
    )


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
