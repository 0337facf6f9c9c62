"""The ``accel config`` questions of the ``fp8_config`` section. Torch-free."""

from __future__ import annotations

from typing import Any

from .config import override_linear_precision


def _valid_override(answer: str) -> str | None:
    try:
        override_linear_precision(answer)
    except ValueError as error:
        return str(error)
    return None


def ask_fp8(ask: Any, config: dict[str, Any]) -> dict[str, Any]:
    """Ask for the FP8 backend and its settings; returns the ``fp8_config`` section.

    ``config`` holds the answers so far (FSDP2's FP8 all-gather is asked about only with FSDP).
    """
    key = "fp8_config."
    backend = ask.select(
        "Which FP8 backend do you want to use?",
        ["te", "msamp", "ao"],
        default="ao",
        key=key + "backend",
    ).upper()
    section: dict[str, Any] = {"backend": backend}
    if backend == "TE":
        section["fp8_format"] = ask.select(
            "Which FP8 format should be used?", ["HYBRID", "E4M3"], "HYBRID", key + "fp8_format"
        )
        section["use_autocast_during_eval"] = ask.confirm(
            "Should FP8 autocast be used during eval mode (better metrics are usually found "
            "without)?",
            False,
            key + "use_autocast_during_eval",
        )
        section["margin"] = ask.integer(
            "What margin should be used for the scaling factor?", 0, key + "margin", minimum=0
        )
        section["interval"] = ask.integer(
            "How often should the scaling factor be recomputed?", 1, key + "interval", minimum=1
        )
        section["amax_history_len"] = ask.integer(
            "What length of amax history should be used?", 1024, key + "amax_history_len", 1
        )
        section["amax_compute_algo"] = ask.select(
            "Which algorithm should compute amax?",
            ["max", "most_recent"],
            "max",
            key + "amax_compute_algo",
        )
        answer = ask.text(
            "Which of the fprop, dgrad and wgrad GEMMs should run in higher precision "
            "(three booleans)?",
            "false,false,false",
            key + "override_linear_precision",
            validate=_valid_override,
        )
        section["override_linear_precision"] = list(override_linear_precision(answer))
    elif backend == "MSAMP":
        section["opt_level"] = ask.select(
            "Which MS-AMP optimization level should be used?", ["O1", "O2"], "O2", key + "opt_level"
        )
    else:
        section["pad_inner_dim"] = ask.confirm(
            "Pad the inner dimensions of FP8 GEMMs to multiples of 16?", True, key + "pad_inner_dim"
        )
        if config.get("distributed_type") == "FSDP":
            section["enable_fsdp_float8_all_gather"] = ask.confirm(
                "All-gather FP8 weights when training with FSDP2?",
                True,
                key + "enable_fsdp_float8_all_gather",
            )
    return section
