"""The ``accel config`` questionnaire for the ``deepspeed_config`` section. Torch-free.

Each key's question comes from its declaration (:data:`accel_deepspeed.config.DEEPSPEED_SECTION`:
select for choices, confirm for booleans, checked text otherwise); the ``use_*`` questions
that only choose what to ask next are written here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .config import DEEPSPEED_SECTION as S

if TYPE_CHECKING:
    from accel.hookspecs import Questions


def ask_deepspeed(ask: Questions, num_machines: int = 1) -> dict[str, object]:
    """Ask Accelerate's DeepSpeed questions; the ``deepspeed_config`` section they produce."""
    section: dict[str, object] = {}
    if ask.confirm(
        "Do you want to specify a json file to a DeepSpeed config?",
        default=False,
        key="use_deepspeed_config_file",
    ):
        section["deepspeed_config_file"] = S.ask(
            ask,
            "deepspeed_config_file",
            "Please enter the path to the json DeepSpeed config file:",
            default="ds_config.json",
        )
    else:
        stage = S.ask(ask, "zero_stage", "What should be your DeepSpeed's ZeRO optimization stage?")
        section["zero_stage"] = stage
        if stage >= 1:
            _ask_offload(ask, section, "optimizer", "optimizer states")
        if stage == 3:
            _ask_offload(ask, section, "param", "parameters")
        section["gradient_accumulation_steps"] = ask.integer(
            "How many gradient accumulation steps you're passing in your script?",
            1,
            key="deepspeed_config.gradient_accumulation_steps",
            minimum=1,
        )
        if ask.confirm(
            "Do you want to use gradient clipping?", default=False, key="use_gradient_clipping"
        ):
            section["gradient_clipping"] = S.ask(
                ask, "gradient_clipping", "What is the gradient clipping value?", default=1.0
            )
        if stage == 3:
            section["zero3_save_16bit_model"] = S.ask(
                ask,
                "zero3_save_16bit_model",
                "Do you want to save 16-bit model weights when using ZeRO Stage-3?",
            )
    section["zero3_init_flag"] = S.ask(
        ask,
        "zero3_init_flag",
        "Do you want to enable `deepspeed.zero.Init` when using ZeRO Stage-3 for constructing massive models?",
    )
    if ask.confirm(
        "Do you want to enable Mixture-of-Experts training (MoE)?", default=False, key="use_moe"
    ):
        section["deepspeed_moe_layer_cls_names"] = S.ask(
            ask,
            "deepspeed_moe_layer_cls_names",
            "Specify the comma-separated list of transformers MoE layer class names (case-sensitive):",
        )
    if num_machines > 1:
        launcher = S.ask(
            ask,
            "deepspeed_multinode_launcher",
            "Which Type of launcher do you want to use?",
            default="pdsh",
        )
        section["deepspeed_multinode_launcher"] = launcher
        if launcher != "standard":
            section["deepspeed_hostfile"] = S.ask(
                ask,
                "deepspeed_hostfile",
                "DeepSpeed configures multi-node compute resources with hostfile. Enter its path:",
                default="/job/hostfile",
            )
            if ask.confirm(
                "Do you want to specify exclusion filter string?",
                default=False,
                key="use_exclusion",
            ):
                section["deepspeed_exclusion_filter"] = S.ask(
                    ask, "deepspeed_exclusion_filter", "DeepSpeed exclusion filter string:"
                )
            if ask.confirm(
                "Do you want to specify inclusion filter string?",
                default=False,
                key="use_inclusion",
            ):
                section["deepspeed_inclusion_filter"] = S.ask(
                    ask, "deepspeed_inclusion_filter", "DeepSpeed inclusion filter string:"
                )
    return section


def _ask_offload(ask: Questions, section: dict[str, object], kind: str, what: str) -> None:
    """``offload_<kind>_device`` (none/cpu/nvme) and, for nvme, ``offload_<kind>_nvme_path``."""
    device = S.ask(ask, f"offload_{kind}_device", f"Where to offload {what}?")
    section[f"offload_{kind}_device"] = device
    if device == "nvme":
        section[f"offload_{kind}_nvme_path"] = S.ask(
            ask, f"offload_{kind}_nvme_path", f"Nvme Path to offload {what}?", default="/nvme"
        )
