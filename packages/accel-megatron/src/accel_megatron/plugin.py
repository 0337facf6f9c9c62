"""Entry-point module of accel-megatron: backend, exports, config section, launch flags, questions.

Imports neither torch nor megatron-core: everything heavy loads when first used.
"""

from __future__ import annotations

from typing import Any

from accel.hookspecs import hookimpl

_EXPORTS = ("MegatronLMPlugin", "MegatronLMDummyScheduler", "MegatronLMDummyDataLoader")


@hookimpl
def accel_backends() -> list[type]:
    """The Megatron-LM backend (``distributed_type: MEGATRON_LM``)."""
    from .backend import MegatronLMBackend

    return [MegatronLMBackend]


@hookimpl
def accel_exports() -> dict[str, str]:
    """``from accel.utils import MegatronLMPlugin, MegatronLMDummyScheduler, ...``."""
    return {name: f"accel_megatron:{name}" for name in _EXPORTS}


@hookimpl
def accel_config_sections() -> dict[str, Any]:
    """The ``megatron_lm_config`` section, declared in :data:`accel_megatron.config.MEGATRON_SECTION`."""
    from .config import MEGATRON_SECTION

    return {MEGATRON_SECTION.key: MEGATRON_SECTION}


@hookimpl
def accel_launch_arguments(parser: Any) -> None:
    """``--use_megatron_lm`` and one ``--megatron_lm_*`` flag per ``megatron_lm_config`` key."""
    from .config import MEGATRON_SECTION

    parser.add_argument(
        "--use_megatron_lm",
        action="store_true",
        help="train with Megatron-LM tensor/pipeline/sequence parallelism (accel-megatron)",
    )
    MEGATRON_SECTION.add_arguments(parser)


@hookimpl
def accel_config_questions(ask: Any, config: dict) -> None:
    """``accel config`` questions for Megatron-LM (asked unless another strategy was chosen)."""
    if str(config.get("distributed_type", "NO")).upper() not in (
        "NO",
        "MULTI_CPU",
        "MULTI_GPU",
        "MEGATRON_LM",
    ):
        return
    if not ask.confirm("Do you want to use Megatron-LM?", default=False, key="use_megatron_lm"):
        return
    from .config import MEGATRON_SECTION as S

    config["distributed_type"] = "MEGATRON_LM"
    section: dict[str, Any] = {}
    section["megatron_lm_tp_degree"] = S.ask(
        ask, "megatron_lm_tp_degree", "What is the Tensor Parallelism degree/size?"
    )
    if section["megatron_lm_tp_degree"] > 1:
        section["megatron_lm_sequence_parallelism"] = S.ask(
            ask,
            "megatron_lm_sequence_parallelism",
            "Do you want to enable Sequence Parallelism?",
            default=True,
        )
    section["megatron_lm_pp_degree"] = S.ask(
        ask, "megatron_lm_pp_degree", "What is the Pipeline Parallelism degree/size?"
    )
    if section["megatron_lm_pp_degree"] > 1:  # at least one micro-batch per stage
        section["megatron_lm_num_micro_batches"] = ask.integer(
            "What is the number of micro-batches?",
            section["megatron_lm_pp_degree"],
            key="megatron_lm_config.megatron_lm_num_micro_batches",
            minimum=section["megatron_lm_pp_degree"],
        )
    section["megatron_lm_recompute_activations"] = S.ask(
        ask,
        "megatron_lm_recompute_activations",
        "Do you want to enable selective activation recomputation?",
        default=True,
    )
    section["megatron_lm_use_distributed_optimizer"] = S.ask(
        ask,
        "megatron_lm_use_distributed_optimizer",
        "Do you want to use the distributed optimizer which shards optimizer state and gradients "
        "across data-parallel ranks?",
        default=True,
    )
    section["megatron_lm_gradient_clipping"] = S.ask(
        ask,
        "megatron_lm_gradient_clipping",
        "What is the gradient clipping value based on global L2 Norm (0 to disable)?",
    )
    config["megatron_lm_config"] = section


@hookimpl
def accel_env_info() -> dict[str, str]:
    """A line for ``accel env``."""
    from importlib import metadata

    try:
        version = metadata.version("megatron-core")
    except metadata.PackageNotFoundError:
        version = "not installed"
    return {"Megatron-LM backend": f"accel-megatron (megatron-core {version})"}
