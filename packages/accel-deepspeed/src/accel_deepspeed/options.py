"""The ``deepspeed_config`` section and ``--use_deepspeed``, declared once.

The declarations alone, so that ``accel launch`` builds its flags from them without importing
the rest of the plugin (:mod:`accel_deepspeed.config` re-exports every name). Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accel.config.options import Option, Section
from accel.config.strategy import Strategy
from accel.errors import ConfigError

OFFLOAD_DEVICES = ("none", "cpu", "nvme")
"""Values of ``offload_optimizer_device`` / ``offload_param_device``."""
MULTINODE_LAUNCHERS = ("pdsh", "standard", "openmpi", "mvapich", "mpich", "nossh", "slurm")
"""Values of ``deepspeed_multinode_launcher`` (Accelerate's list; ``pdsh`` is the default)."""


def _stage(value: object, label: str = "zero_stage") -> int:
    text = str(value).strip()
    if text not in ("0", "1", "2", "3"):
        raise ConfigError(
            f"{label}={value!r} is not a ZeRO stage: use 0 (off), 1 (optimizer states), "
            "2 (+ gradients) or 3 (+ parameters)"
        )
    return int(text)


def _clip(value: float | str | None, label: str = "gradient_clipping") -> float | str | None:
    if value is None or value == "auto":
        return value
    if str(value).strip().lower() == "none":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{label}={value!r} is not a number") from None


def check_combination(stage: int, optimizer_device: str, param_device: str) -> None:
    """Reject offload settings the ZeRO stage cannot run, naming the key to change.

    ``offload_param_device`` below stage 3 is accepted (see :func:`ignored_param_offload`).
    """
    if optimizer_device != "none" and stage == 0:
        raise ConfigError(
            f"offload_optimizer_device={optimizer_device} needs ZeRO (zero_stage 1, 2 or 3), "
            "but zero_stage is 0: set zero_stage 2 or offload_optimizer_device none"
        )


def ignored_param_offload(stage: int | str, param_device: str) -> str | None:
    """Why ``offload_param_device`` has no effect at this ZeRO stage, or None when it has.

    As in Accelerate, which writes the ``offload_param`` section whatever the stage: DeepSpeed
    only reads it in stage 3 (parameters are partitioned there alone) and ignores it below.
    """
    if param_device == "none" or stage in (3, "auto"):
        return None
    return (
        f"offload_param_device={param_device} has no effect with zero_stage {stage}: DeepSpeed "
        "offloads parameters in ZeRO stage 3 only (set zero_stage 3 to offload them)"
    )


def _check_section(values: Mapping[str, Any]) -> None:
    """The section's offload devices must suit its ZeRO stage (unless a JSON file decides)."""
    if values["deepspeed_config_file"] is None:
        check_combination(
            values["zero_stage"],
            values["offload_optimizer_device"],
            values["offload_param_device"],
        )


_ON = "true/false: "
DEEPSPEED_SECTION = Section(
    "deepspeed_config",
    [
        Option(
            "zero_stage",
            int,
            2,
            choices=(0, 1, 2, 3),
            reader=_stage,
            help="ZeRO stage: 0 (off), 1 (optimizer states), 2 (+ gradients), 3 (+ parameters)",
        ),
        Option(
            "gradient_accumulation_steps",
            int,
            minimum=1,
            extra=("auto",),
            flag=None,  # a core flag; the section key is still read from config files
            help="an integer >= 1 (or auto)",
        ),
        Option("gradient_clipping", float, reader=_clip, help="a number (or auto)"),
        Option(
            "offload_optimizer_device",
            default="none",
            choices=OFFLOAD_DEVICES,
            help="where optimizer states are offloaded (ZeRO >= 1)",
        ),
        Option(
            "offload_param_device",
            default="none",
            choices=OFFLOAD_DEVICES,
            help="where parameters are offloaded (ZeRO-3 only)",
        ),
        Option("offload_optimizer_nvme_path", help="a directory on an NVMe drive"),
        Option("offload_param_nvme_path", help="a directory on an NVMe drive"),
        Option(
            "zero3_init_flag",
            bool,
            False,
            help=_ON + "build the model under deepspeed.zero.Init (ZeRO-3)",
        ),
        Option(
            "zero3_save_16bit_model",
            bool,
            False,
            help=_ON + "gather 16-bit weights when saving (ZeRO-3)",
        ),
        Option("deepspeed_config_file", help="path of a DeepSpeed JSON config"),
        Option("deepspeed_moe_layer_cls_names", list, help="comma-separated MoE layer class names"),
        Option("deepspeed_hostfile", help="DeepSpeed hostfile (multi-node)"),
        Option("deepspeed_inclusion_filter", help="DeepSpeed --include string (multi-node)"),
        Option("deepspeed_exclusion_filter", help="DeepSpeed --exclude string (multi-node)"),
        Option(
            "deepspeed_multinode_launcher",
            choices=MULTINODE_LAUNCHERS,
            help="how DeepSpeed starts the processes of a multi-node job",
        ),
    ],
    title="DeepSpeed",
    checks=[_check_section],
)
"""The ``deepspeed_config`` section: its keys, types, defaults and ``accel launch`` flags."""

DEEPSPEED_STRATEGY = Strategy(
    DEEPSPEED_SECTION,
    "use_deepspeed",
    help="train with DeepSpeed (accel-deepspeed)",
    question="Do you want to use DeepSpeed?",
)
"""``--use_deepspeed`` and the ``accel config`` question that choose DeepSpeed."""
