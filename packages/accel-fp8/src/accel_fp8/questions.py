"""The ``accel config`` questions of the ``fp8_config`` section. Torch-free.

Each question comes from the key's declaration (:data:`accel_fp8.config.FP8_SECTION`);
only which keys are asked, by backend, is decided here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .config import FP8_SECTION as S

if TYPE_CHECKING:
    from accel.hookspecs import Questions


def ask_fp8(ask: Questions, config: Mapping[str, object]) -> dict[str, object]:
    """Ask for the FP8 backend and its settings; returns the ``fp8_config`` section.

    ``config`` holds the answers so far (FSDP2's FP8 all-gather is asked about only with FSDP).
    """
    backend = S.ask(ask, "backend", default="ao")
    section: dict[str, object] = {"backend": backend}
    if backend == "TE":
        section["fp8_format"] = S.ask(ask, "fp8_format", "Which FP8 format should be used?")
        section["use_autocast_during_eval"] = S.ask(
            ask,
            "use_autocast_during_eval",
            "Should FP8 autocast be used during eval mode (better metrics are usually found "
            "without)?",
        )
        section["margin"] = S.ask(
            ask, "margin", "What margin should be used for the scaling factor?"
        )
        section["interval"] = S.ask(
            ask, "interval", "How often should the scaling factor be recomputed?"
        )
        section["amax_history_len"] = S.ask(
            ask, "amax_history_len", "What length of amax history should be used?"
        )
        section["amax_compute_algo"] = S.ask(
            ask,
            "amax_compute_algo",
            "Which algorithm should compute amax?",
            default="max",
            choices=["max", "most_recent"],
        )
        section["override_linear_precision"] = list(
            S.ask(
                ask,
                "override_linear_precision",
                "Which of the fprop, dgrad and wgrad GEMMs should run in higher precision "
                "(three booleans)?",
                default="false,false,false",
            )
        )
    elif backend == "MSAMP":
        section["opt_level"] = S.ask(
            ask, "opt_level", "Which MS-AMP optimization level should be used?"
        )
    else:
        section["pad_inner_dim"] = S.ask(
            ask, "pad_inner_dim", "Pad the inner dimensions of FP8 GEMMs to multiples of 16?"
        )
        if config.get("distributed_type") == "FSDP":
            section["enable_fsdp_float8_all_gather"] = S.ask(
                ask,
                "enable_fsdp_float8_all_gather",
                "All-gather FP8 weights when training with FSDP2?",
                default=True,
            )
    return section
