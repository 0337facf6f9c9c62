"""The ``accel config`` questionnaire for the ``megatron_lm_config`` section. Torch-free.

Each key's question comes from its declaration (:data:`accel_megatron.config.MEGATRON_SECTION`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .config import MEGATRON_SECTION as S

if TYPE_CHECKING:
    from accel.hookspecs import Questions


def ask_megatron(ask: Questions) -> dict[str, object]:
    """Ask the Megatron-LM questions; the ``megatron_lm_config`` section they produce."""
    section: dict[str, object] = {}
    tp_degree = section["megatron_lm_tp_degree"] = S.ask(
        ask, "megatron_lm_tp_degree", "What is the Tensor Parallelism degree/size?"
    )
    if tp_degree > 1:
        section["megatron_lm_sequence_parallelism"] = S.ask(
            ask,
            "megatron_lm_sequence_parallelism",
            "Do you want to enable Sequence Parallelism?",
            default=True,
        )
    pp_degree = section["megatron_lm_pp_degree"] = S.ask(
        ask, "megatron_lm_pp_degree", "What is the Pipeline Parallelism degree/size?"
    )
    if pp_degree > 1:  # at least one micro-batch per stage
        section["megatron_lm_num_micro_batches"] = ask.integer(
            "What is the number of micro-batches?",
            pp_degree,
            key="megatron_lm_config.megatron_lm_num_micro_batches",
            minimum=pp_degree,
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
    return section
