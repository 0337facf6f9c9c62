"""Entry-point module of accel-megatron: backend, exports, config section, launch flags, questions.

Imports neither torch nor megatron-core: everything heavy loads when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.hookspecs import hookimpl
from accel.lazy import catalog_exports

if TYPE_CHECKING:
    import argparse

    from accel.config.options import Section
    from accel.hookspecs import Questions


@hookimpl
def accel_backends() -> list[type]:
    """The Megatron-LM backend (``distributed_type: MEGATRON_LM``)."""
    from .backend import MegatronLMBackend

    return [MegatronLMBackend]


@hookimpl
def accel_exports() -> dict[str, str]:
    """``from accel.utils import MegatronLMPlugin, MegatronLMDummyScheduler, ...``.

    The rows of :data:`accel.catalog.EXPORTS` for this distribution, each served by
    ``accel_megatron``'s lazy names.
    """
    return catalog_exports("accel-megatron", "accel_megatron")


@hookimpl
def accel_config_sections() -> dict[str, Section]:
    """The ``megatron_lm_config`` section, declared in :data:`accel_megatron.config.MEGATRON_SECTION`."""
    from .config import MEGATRON_SECTION

    return {MEGATRON_SECTION.key: MEGATRON_SECTION}


@hookimpl
def accel_launch_arguments(parser: argparse._ArgumentGroup) -> None:
    """``--use_megatron_lm`` and one ``--megatron_lm_*`` flag per ``megatron_lm_config`` key."""
    from .config import MEGATRON_STRATEGY

    MEGATRON_STRATEGY.add_arguments(parser)


@hookimpl
def accel_config_questions(ask: Questions, config: dict[str, object]) -> None:
    """``accel config`` questions for Megatron-LM (asked unless another strategy was chosen)."""
    from .config import MEGATRON_STRATEGY

    if MEGATRON_STRATEGY.chosen(ask, config):
        from .questions import ask_megatron

        config["megatron_lm_config"] = ask_megatron(ask)


@hookimpl
def accel_env_info() -> dict[str, str]:
    """A line for ``accel env``."""
    from importlib import metadata

    try:
        version = metadata.version("megatron-core")
    except metadata.PackageNotFoundError:
        version = "not installed"
    return {"Megatron-LM backend": f"accel-megatron (megatron-core {version})"}
