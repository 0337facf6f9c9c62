"""Entry-point module of accel-fsdp: backend, config section, launch flags and questions. Torch-free."""

from __future__ import annotations

from typing import Any

from accel.hookspecs import hookimpl


@hookimpl
def accel_backends() -> list[type]:
    """The FSDP backend (``distributed_type: FSDP``)."""
    from .backend import FSDPBackend

    return [FSDPBackend]


@hookimpl
def accel_config_sections() -> dict[str, Any]:
    """The ``fsdp_config`` section and its validator."""
    from .config import validate_section

    return {"fsdp_config": validate_section}


@hookimpl
def accel_launch_arguments(parser: Any) -> None:
    """``--use_fsdp`` and the ``--fsdp_*`` flags of ``accel launch``."""
    from .config import FSDP_CONFIG_KEYS

    parser.add_argument(
        "--use_fsdp",
        action="store_true",
        help="train with Fully Sharded Data Parallel (accel-fsdp)",
    )
    for key, allowed in FSDP_CONFIG_KEYS.items():
        parser.add_argument(f"--{key}", default=None, metavar="VALUE", help=f"FSDP: {allowed}")


@hookimpl
def accel_config_questions(ask: Any, config: dict) -> None:
    """``accel config`` questions for FSDP (asked unless another strategy was already chosen)."""
    if str(config.get("distributed_type", "NO")).upper() not in (
        "NO",
        "MULTI_CPU",
        "MULTI_GPU",
        "FSDP",
    ):
        return
    if not ask.confirm(
        "Do you want to use FullyShardedDataParallel (FSDP)?", default=False, key="use_fsdp"
    ):
        return
    from .config import AUTO_WRAP_POLICIES, SHARDING_STRATEGIES

    config["distributed_type"] = "FSDP"
    section: dict[str, Any] = {}
    key = "fsdp_config."
    section["fsdp_version"] = int(
        ask.select("Which FSDP version?", ["2", "1"], default="2", key=key + "fsdp_version")
    )
    section["fsdp_sharding_strategy"] = ask.select(
        "Sharding strategy?",
        list(SHARDING_STRATEGIES),
        default="FULL_SHARD",
        key=key + "fsdp_sharding_strategy",
    )
    section["fsdp_offload_params"] = ask.confirm(
        "Offload parameters to the CPU?", default=False, key=key + "fsdp_offload_params"
    )
    policy = ask.select(
        "Auto-wrap policy?",
        list(AUTO_WRAP_POLICIES),
        default="TRANSFORMER_BASED_WRAP",
        key=key + "fsdp_auto_wrap_policy",
    )
    section["fsdp_auto_wrap_policy"] = policy
    if policy == "TRANSFORMER_BASED_WRAP":
        names = ask.text(
            "Layer classes to wrap (comma-separated; empty: the model's _no_split_modules)?",
            default="",
            key=key + "fsdp_transformer_layer_cls_to_wrap",
        )
        if names:
            section["fsdp_transformer_layer_cls_to_wrap"] = names
    elif policy == "SIZE_BASED_WRAP":
        section["fsdp_min_num_params"] = int(
            ask.text(
                "Minimum parameters per wrapped module?",
                default="100000000",
                key=key + "fsdp_min_num_params",
            )
        )
    section["fsdp_state_dict_type"] = ask.select(
        "Checkpoint state dict type?",
        ["SHARDED_STATE_DICT", "FULL_STATE_DICT"],
        default="SHARDED_STATE_DICT",
        key=key + "fsdp_state_dict_type",
    )
    section["fsdp_cpu_ram_efficient_loading"] = ask.confirm(
        "CPU-RAM-efficient model loading?", default=True, key=key + "fsdp_cpu_ram_efficient_loading"
    )
    section["fsdp_activation_checkpointing"] = ask.confirm(
        "Activation checkpointing?", default=False, key=key + "fsdp_activation_checkpointing"
    )
    config["fsdp_config"] = section


@hookimpl
def accel_env_info() -> dict[str, str]:
    """A line for ``accel env``."""
    return {"FSDP backend": "accel-fsdp (FSDP2 fully_shard, FSDP1, DCP checkpoints)"}


@hookimpl
def accel_exports() -> dict[str, str]:
    """``FullyShardedDataParallelPlugin`` under ``accel`` / ``accel.utils``."""
    return {"FullyShardedDataParallelPlugin": "accel_fsdp:FullyShardedDataParallelPlugin"}
