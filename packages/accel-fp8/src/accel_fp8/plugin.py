"""Entry-point module of accel-fp8: the ``fp8`` precision, exports, the ``fp8_config`` section,
``accel launch --fp8_*`` flags and ``accel config`` questions. Imports neither torch nor any
FP8 library."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.hookspecs import hookimpl
from accel.lazy import catalog_exports

if TYPE_CHECKING:
    import argparse

    from accel.config.options import Section
    from accel.hookspecs import Questions


@hookimpl
def accel_precisions() -> list[type]:
    """``mixed_precision="fp8"`` (the backend is chosen when the Accelerator is built)."""
    from .precision import FP8Precision

    return [FP8Precision]


@hookimpl
def accel_exports() -> dict[str, str]:
    """The recipe kwargs handlers and FP8 model helpers under ``accel`` / ``accel.utils``.

    The rows of :data:`accel.catalog.EXPORTS` for this distribution, each served by
    ``accel_fp8``'s lazy names.
    """
    return catalog_exports("accel-fp8", "accel_fp8")


@hookimpl
def accel_config_sections() -> dict[str, Section]:
    """The ``fp8_config`` section, declared in :data:`accel_fp8.config.FP8_SECTION`."""
    from .config import FP8_SECTION

    return {FP8_SECTION.key: FP8_SECTION}


@hookimpl
def accel_launch_arguments(parser: argparse._ArgumentGroup) -> None:
    """``--fp8_backend``, ``--fp8_opt_level``, ... (into the ``fp8_config`` section)."""
    from .config import FP8_SECTION

    FP8_SECTION.add_arguments(parser)


@hookimpl
def accel_config_questions(ask: Questions, config: dict[str, object]) -> None:
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
