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
    """The ``megatron_lm_config`` section and its validator."""
    from .config import validate_section

    return {"megatron_lm_config": validate_section}


@hookimpl
def accel_launch_arguments(parser: Any) -> None:
    """``--use_megatron_lm`` and one ``--megatron_lm_*`` flag per ``megatron_lm_config`` key."""
    from .config import MEGATRON_CONFIG_KEYS

    parser.add_argument(
        "--use_megatron_lm",
        action="store_true",
        help="train with Megatron-LM tensor/pipeline/sequence parallelism (accel-megatron)",
    )
    for key, allowed in MEGATRON_CONFIG_KEYS.items():
        parser.add_argument(
            f"--{key}", default=None, metavar="VALUE", help=f"Megatron-LM: {allowed}"
        )


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
    config["distributed_type"] = "MEGATRON_LM"
    key = "megatron_lm_config.megatron_lm_"
    section: dict[str, Any] = {}
    section["megatron_lm_tp_degree"] = ask.integer(
        "What is the Tensor Parallelism degree/size?", 1, key=key + "tp_degree", minimum=1
    )
    if section["megatron_lm_tp_degree"] > 1:
        section["megatron_lm_sequence_parallelism"] = ask.confirm(
            "Do you want to enable Sequence Parallelism?",
            default=True,
            key=key + "sequence_parallelism",
        )
    section["megatron_lm_pp_degree"] = ask.integer(
        "What is the Pipeline Parallelism degree/size?", 1, key=key + "pp_degree", minimum=1
    )
    if section["megatron_lm_pp_degree"] > 1:
        section["megatron_lm_num_micro_batches"] = ask.integer(
            "What is the number of micro-batches?",
            section["megatron_lm_pp_degree"],
            key=key + "num_micro_batches",
            minimum=section["megatron_lm_pp_degree"],
        )
    section["megatron_lm_recompute_activations"] = ask.confirm(
        "Do you want to enable selective activation recomputation?",
        default=True,
        key=key + "recompute_activations",
    )
    section["megatron_lm_use_distributed_optimizer"] = ask.confirm(
        "Do you want to use the distributed optimizer which shards optimizer state and gradients "
        "across data-parallel ranks?",
        default=True,
        key=key + "use_distributed_optimizer",
    )
    section["megatron_lm_gradient_clipping"] = ask.number(
        "What is the gradient clipping value based on global L2 Norm (0 to disable)?",
        1.0,
        key=key + "gradient_clipping",
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
