"""The ``accel config`` questionnaire for the ``fsdp_config`` and ``parallelism_config`` sections.

Each key's question comes from its declaration (:data:`accel_fsdp.config.FSDP_SECTION`,
:data:`accel_fsdp.nd_config.PARALLELISM_SECTION`); the ``use_*`` questions that only choose
what to ask next are written here. Torch-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .config import FSDP_SECTION as S

if TYPE_CHECKING:
    from accel.hookspecs import Questions


def ask_fsdp(ask: Questions) -> dict[str, dict[str, object]]:
    """Ask the FSDP questions; the sections they produce (``fsdp_config``, maybe ``parallelism_config``)."""
    section: dict[str, object] = {}
    section["fsdp_version"] = S.ask(ask, "fsdp_version", "Which FSDP version?", choices=[2, 1])
    section["fsdp_sharding_strategy"] = S.ask(ask, "fsdp_sharding_strategy", "Sharding strategy?")
    section["fsdp_offload_params"] = S.ask(
        ask, "fsdp_offload_params", "Offload parameters to the CPU?"
    )
    policy = S.ask(
        ask, "fsdp_auto_wrap_policy", "Auto-wrap policy?", default="TRANSFORMER_BASED_WRAP"
    )
    section["fsdp_auto_wrap_policy"] = policy
    if policy == "TRANSFORMER_BASED_WRAP":
        names = S.ask(
            ask,
            "fsdp_transformer_layer_cls_to_wrap",
            "Layer classes to wrap (comma-separated; empty: the model's _no_split_modules)?",
        )
        if names:
            section["fsdp_transformer_layer_cls_to_wrap"] = names
    elif policy == "SIZE_BASED_WRAP":
        section["fsdp_min_num_params"] = S.ask(
            ask, "fsdp_min_num_params", "Minimum parameters per wrapped module?", default=100000000
        )
    section["fsdp_state_dict_type"] = S.ask(
        ask,
        "fsdp_state_dict_type",
        "Checkpoint state dict type?",
        default="SHARDED_STATE_DICT",
        choices=["SHARDED_STATE_DICT", "FULL_STATE_DICT"],
    )
    section["fsdp_cpu_ram_efficient_loading"] = S.ask(
        ask, "fsdp_cpu_ram_efficient_loading", "CPU-RAM-efficient model loading?", default=True
    )
    section["fsdp_activation_checkpointing"] = S.ask(
        ask, "fsdp_activation_checkpointing", "Activation checkpointing?"
    )
    sections: dict[str, dict[str, object]] = {"fsdp_config": section}
    if section["fsdp_version"] == 2 and ask.confirm(
        "Do you want to use the parallelism config (N-D parallelism)?",
        default=False,
        key="use_parallelism_config",
    ):
        sections["parallelism_config"] = ask_parallelism(ask)
    return sections


def ask_parallelism(ask: Questions) -> dict[str, object]:
    """Ask the N-D parallelism sizes; the ``parallelism_config`` section they produce."""
    from .nd_config import PARALLELISM_SECTION as P
    from .nd_config import PREFIX

    layout: dict[str, object] = {}
    for name, question in (
        ("dp_replicate_size", "Data-parallel replicate size?"),
        ("dp_shard_size", "FSDP shard size?"),
        ("tp_size", "Tensor-parallel size?"),
        ("cp_size", "Context-parallel size?"),
    ):
        layout[PREFIX + name] = P.ask(ask, PREFIX + name, question)
    cp_size = layout[PREFIX + "cp_size"]
    if isinstance(cp_size, int) and cp_size > 1:
        layout[PREFIX + "cp_comm_strategy"] = P.ask(
            ask, PREFIX + "cp_comm_strategy", "Context-parallel communication strategy?"
        )
    return layout
