"""Entry-point module of accel-tpu: backend, launchers, ``accel launch`` flags, ``accel tpu-config``,
``accel config`` questions and ``accel env`` lines. Imports neither torch nor torch_xla."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.config.options import Option, Section
from accel.hookspecs import hookimpl

if TYPE_CHECKING:
    import argparse

    from accel.hookspecs import CliCommand, Questions


@hookimpl
def accel_backends() -> list[type]:
    """The XLA backend (``distributed_type: XLA``, or its old name ``TPU``)."""
    from .backend import XLABackend

    return [XLABackend]


@hookimpl
def accel_launchers() -> list[type]:
    """``xmp.spawn`` on this host, and ``gcloud ssh`` over a TPU pod."""
    from .launcher import TPUPodLauncher, XLALauncher

    return [XLALauncher, TPUPodLauncher]


@hookimpl
def accel_cli_commands() -> list[CliCommand]:
    """``accel tpu-config``."""
    from .tpu_config import TPUConfigCommand

    return [TPUConfigCommand()]


XLA_SELECTORS = Section(
    "",
    [
        Option("tpu", bool, help="train on XLA devices (TPU) through torch_xla", store_true=True),
        Option("use_xla", bool, help="same as --tpu", store_true=True),
    ],
    title="XLA (TPU)",
)
"""``--tpu`` / ``--use_xla``: choose ``distributed_type: XLA`` (Accelerate's names)."""


@hookimpl
def accel_launch_arguments(parser: argparse._ArgumentGroup) -> None:
    """``--tpu`` / ``--use_xla`` and the TPU pod flags of ``accel launch`` (Accelerate's names):
    the flags of core's ``tpu_*`` keys, declared in :data:`accel.config.core_options.CORE_SECTION`."""
    from accel.config.core_options import CORE_SECTION

    XLA_SELECTORS.add_arguments(parser)
    CORE_SECTION.add_arguments(parser, check=False, plugin="accel-tpu")


@hookimpl
def accel_config_questions(ask: Questions, config: dict[str, object]) -> None:
    """``accel config`` questions for XLA devices (asked when no other strategy was chosen)."""
    if str(config.get("distributed_type", "NO")).upper() not in ("NO", "XLA", "TPU"):
        return
    if not ask.confirm("Do you want to train on TPU (XLA devices)?", default=False, key="use_tpu"):
        return
    config["distributed_type"] = "XLA"
    config["use_cpu"] = False
    config["main_training_function"] = ask.text(
        "What is the name of the function in your script that should be launched on every device?",
        default="main",
        key="main_training_function",
        validate=lambda a: None if a.strip().isidentifier() else "enter a Python function name",
    ).strip()
    if config.get("mixed_precision") == "bf16":
        config["downcast_bf16"] = (
            "yes"
            if ask.confirm(
                "Should float32 tensors also be downcast to bfloat16 on the TPU?",
                default=False,
                key="downcast_bf16",
            )
            else "no"
        )
    config["tpu_use_cluster"] = ask.confirm(
        "Are you using a TPU pod (several hosts)?", default=False, key="tpu_use_cluster"
    )
    if config["tpu_use_cluster"]:
        _pod_questions(ask, config)


def _pod_questions(ask: Questions, config: dict[str, object]) -> None:
    from .pod import TPU_NAME, TPU_ZONE

    config["tpu_name"] = ask.text(
        "What is the name of your TPU pod?",
        key="tpu_name",
        validate=lambda a: None if TPU_NAME.match(a.strip()) else "lowercase letters, digits, -",
    ).strip()
    config["tpu_zone"] = ask.text(
        "What is its zone (such as us-central2-b)?",
        key="tpu_zone",
        validate=lambda a: None if TPU_ZONE.match(a.strip()) else "a zone such as europe-west4-a",
    ).strip()
    config["tpu_use_sudo"] = ask.confirm(
        "Should the script run with sudo on the pod workers?", default=False, key="tpu_use_sudo"
    )
    if ask.confirm(
        "Do you have a file of commands to run on each worker at startup (accel tpu-config)?",
        default=False,
        key="use_command_file",
    ):
        config["command_file"] = ask.text("Path to that file?", key="command_file").strip()
    else:
        typed = ask.text(
            "Commands to run on each worker at startup, separated by ';' (empty: none)?",
            default="",
            key="commands",
        )
        config["commands"] = [c.strip() for c in typed.split(";") if c.strip()] or None
    env = ask.text(
        "Environment variables for the workers, NAME=VALUE separated by spaces (empty: none)?",
        default="",
        key="tpu_env",
    )
    config["tpu_env"] = env.split()


@hookimpl
def accel_env_info() -> dict[str, str]:
    """torch_xla's version and device type, for ``accel env`` (without starting the runtime)."""
    from importlib import metadata

    try:
        version = metadata.version("torch-xla")
    except metadata.PackageNotFoundError:
        version = "not installed"
    return {"torch_xla version": version, "XLA device (PJRT_DEVICE)": _pjrt_device()}


def _pjrt_device() -> str:
    import os

    return os.environ.get("PJRT_DEVICE") or "not set (torch_xla picks TPU when present)"
