"""The ``accel config`` questionnaire for the ``deepspeed_config`` section. Torch-free."""

from __future__ import annotations

from typing import Any

from .config import MULTINODE_LAUNCHERS


def _number(answer: str) -> str | None:
    try:
        float(answer)
    except ValueError:
        return "enter a number"
    return None


def ask_deepspeed(ask: Any, num_machines: int = 1) -> dict[str, Any]:
    """Ask Accelerate's DeepSpeed questions; the ``deepspeed_config`` section they produce."""
    key = "deepspeed_config."
    section: dict[str, Any] = {}
    if ask.confirm(
        "Do you want to specify a json file to a DeepSpeed config?",
        default=False,
        key="use_deepspeed_config_file",
    ):
        section["deepspeed_config_file"] = ask.text(
            "Please enter the path to the json DeepSpeed config file:",
            "ds_config.json",
            key=key + "deepspeed_config_file",
        ).strip()
    else:
        stage = int(
            ask.select(
                "What should be your DeepSpeed's ZeRO optimization stage?",
                ["0", "1", "2", "3"],
                default="2",
                key=key + "zero_stage",
            )
        )
        section["zero_stage"] = stage
        if stage >= 1:
            _ask_offload(ask, section, key, "optimizer", "optimizer states")
        if stage == 3:
            _ask_offload(ask, section, key, "param", "parameters")
        section["gradient_accumulation_steps"] = ask.integer(
            "How many gradient accumulation steps you're passing in your script?",
            1,
            key=key + "gradient_accumulation_steps",
            minimum=1,
        )
        if ask.confirm(
            "Do you want to use gradient clipping?", default=False, key="use_gradient_clipping"
        ):
            section["gradient_clipping"] = float(
                ask.text(
                    "What is the gradient clipping value?",
                    "1.0",
                    key=key + "gradient_clipping",
                    validate=_number,
                )
            )
        if stage == 3:
            section["zero3_save_16bit_model"] = ask.confirm(
                "Do you want to save 16-bit model weights when using ZeRO Stage-3?",
                default=False,
                key=key + "zero3_save_16bit_model",
            )
    section["zero3_init_flag"] = ask.confirm(
        "Do you want to enable `deepspeed.zero.Init` when using ZeRO Stage-3 for constructing massive models?",
        default=False,
        key=key + "zero3_init_flag",
    )
    if ask.confirm(
        "Do you want to enable Mixture-of-Experts training (MoE)?", default=False, key="use_moe"
    ):
        section["deepspeed_moe_layer_cls_names"] = ask.text(
            "Specify the comma-separated list of transformers MoE layer class names (case-sensitive):",
            "",
            key=key + "deepspeed_moe_layer_cls_names",
        ).strip()
    if num_machines > 1:
        launcher = ask.select(
            "Which Type of launcher do you want to use?",
            list(MULTINODE_LAUNCHERS),
            default="pdsh",
            key=key + "deepspeed_multinode_launcher",
        )
        section["deepspeed_multinode_launcher"] = launcher
        if launcher != "standard":
            section["deepspeed_hostfile"] = ask.text(
                "DeepSpeed configures multi-node compute resources with hostfile. Enter its path:",
                "/job/hostfile",
                key=key + "deepspeed_hostfile",
            ).strip()
            if ask.confirm(
                "Do you want to specify exclusion filter string?",
                default=False,
                key="use_exclusion",
            ):
                section["deepspeed_exclusion_filter"] = ask.text(
                    "DeepSpeed exclusion filter string:", "", key=key + "deepspeed_exclusion_filter"
                ).strip()
            if ask.confirm(
                "Do you want to specify inclusion filter string?",
                default=False,
                key="use_inclusion",
            ):
                section["deepspeed_inclusion_filter"] = ask.text(
                    "DeepSpeed inclusion filter string:", "", key=key + "deepspeed_inclusion_filter"
                ).strip()
    return section


def _ask_offload(ask: Any, section: dict[str, Any], key: str, kind: str, what: str) -> None:
    """``offload_<kind>_device`` (none/cpu/nvme) and, for nvme, ``offload_<kind>_nvme_path``."""
    device = ask.select(
        f"Where to offload {what}?",
        ["none", "cpu", "nvme"],
        default="none",
        key=f"{key}offload_{kind}_device",
    )
    section[f"offload_{kind}_device"] = device
    if device == "nvme":
        section[f"offload_{kind}_nvme_path"] = ask.text(
            f"Nvme Path to offload {what}?", "/nvme", key=f"{key}offload_{kind}_nvme_path"
        ).strip()
