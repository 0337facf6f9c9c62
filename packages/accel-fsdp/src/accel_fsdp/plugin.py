"""Entry-point module of accel-fsdp: backend, config section, launch flags and questions. Torch-free."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.config.options import Option, Section
from accel.hookspecs import hookimpl
from accel.lazy import catalog_exports

if TYPE_CHECKING:
    import argparse

    from accel.config.options import Section
    from accel.hookspecs import Questions


@hookimpl
def accel_backends() -> list[type]:
    """The FSDP backend (``distributed_type: FSDP``)."""
    from .backend import FSDPBackend

    return [FSDPBackend]


@hookimpl
def accel_config_sections() -> dict[str, Section]:
    """The ``fsdp_config`` section, declared once in :data:`accel_fsdp.config.FSDP_SECTION`."""
    from .config import FSDP_SECTION
    from .nd_config import PARALLELISM_SECTION

    return {FSDP_SECTION.key: FSDP_SECTION, PARALLELISM_SECTION.key: PARALLELISM_SECTION}


USE_PARALLELISM = Section(
    "",
    [
        Option(
            "use_parallelism_config",
            bool,
            help="N-D parallelism from the --parallelism_config_* flags / parallelism_config "
            "section",
            store_true=True,
            in_file=False,
        )
    ],
    title="N-D parallelism",
)
"""``--use_parallelism_config``: turns N-D parallelism on."""


@hookimpl
def accel_launch_arguments(parser: argparse._ArgumentGroup) -> None:
    """``--use_fsdp`` and the ``--fsdp_*`` flags of ``accel launch`` (from the declaration)."""
    from .config import FSDP_STRATEGY
    from .nd_config import PARALLELISM_SECTION

    FSDP_STRATEGY.add_arguments(parser)
    USE_PARALLELISM.add_arguments(parser)
    PARALLELISM_SECTION.add_arguments(parser)


@hookimpl
def accel_launch_environment(config: dict) -> dict[str, str]:
    """``ACCEL_USE_PARALLELISM_CONFIG`` and ``PARALLELISM_CONFIG_*`` (checks the sizes first); for
    an FSDP launch also the variables transformers and PEFT read themselves, under Accelerate's
    names: ``FSDP_CPU_RAM_EFFICIENT_LOADING`` and ``FSDP_TRANSFORMER_CLS_TO_WRAP``."""
    from .nd_config import launch_environment

    env = launch_environment(config)
    if str(config.get("distributed_type") or "").upper() == "FSDP":
        section = config.get("fsdp_config") or {}
        loading = section.get("fsdp_cpu_ram_efficient_loading")
        if loading is not None:
            env["FSDP_CPU_RAM_EFFICIENT_LOADING"] = "true" if loading else "false"
        classes = section.get("fsdp_transformer_layer_cls_to_wrap")
        if classes:
            names = classes if isinstance(classes, str) else ",".join(map(str, classes))
            env["FSDP_TRANSFORMER_CLS_TO_WRAP"] = names
    return env


@hookimpl
def accel_config_questions(ask: Questions, config: dict[str, object]) -> None:
    """``accel config`` questions for FSDP (asked unless another strategy was already chosen)."""
    from .config import FSDP_STRATEGY

    if FSDP_STRATEGY.chosen(ask, config):
        from .questions import ask_fsdp

        config.update(ask_fsdp(ask))


@hookimpl
def accel_env_info() -> dict[str, str]:
    """A line for ``accel env``."""
    return {"FSDP backend": "accel-fsdp (FSDP2 fully_shard, FSDP1, DCP checkpoints)"}


@hookimpl
def accel_exports() -> dict[str, str]:
    """Accelerate's FSDP names under ``accel`` / ``accel.utils`` (and so ``accel.utils.fsdp_utils``,
    ``accel.utils.constants``): the plugin class, the checkpoint functions transformers' Trainer
    calls, PEFT's and TRL's helpers, the ``FSDP_*`` constants.

    The rows of :data:`accel.catalog.EXPORTS` for this distribution, each served by
    ``accel_fsdp``'s lazy names.
    """
    return catalog_exports("accel-fsdp", "accel_fsdp")
