"""Entry-point module of accel-deepspeed: backend, launcher, exports, config section, flags, questions.

Torch-free and DeepSpeed-free: everything heavy is imported by the returned classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accel.hookspecs import hookimpl
from accel.lazy import catalog_exports

if TYPE_CHECKING:
    import argparse

    from accel.config.options import Section
    from accel.hookspecs import Questions


@hookimpl
def accel_backends() -> list[type]:
    """The DeepSpeed backend (``distributed_type: DEEPSPEED``)."""
    from .backend import DeepSpeedBackend

    return [DeepSpeedBackend]


@hookimpl
def accel_launchers() -> list[type]:
    """The multi-node launcher through DeepSpeed's runner."""
    from .launcher import DeepSpeedMultinodeLauncher

    return [DeepSpeedMultinodeLauncher]


@hookimpl
def accel_exports() -> dict[str, str]:
    """``DeepSpeedPlugin``, the dummy optimizer and scheduler, the engine wrappers under ``accel`` / ``accel.utils``.

    The rows of :data:`accel.catalog.EXPORTS` for this distribution, each served by
    ``accel_deepspeed``'s lazy names.
    """
    return catalog_exports("accel-deepspeed", "accel_deepspeed")


@hookimpl
def accel_config_sections() -> dict[str, Section]:
    """The ``deepspeed_config`` section, declared in :data:`accel_deepspeed.config.DEEPSPEED_SECTION`."""
    from .options import DEEPSPEED_SECTION

    return {DEEPSPEED_SECTION.key: DEEPSPEED_SECTION}


@hookimpl
def accel_launch_arguments(parser: argparse._ArgumentGroup) -> None:
    """``--use_deepspeed`` and the DeepSpeed flags of ``accel launch`` (values go to ``deepspeed_config``)."""
    from .options import DEEPSPEED_STRATEGY

    DEEPSPEED_STRATEGY.add_arguments(parser)


@hookimpl
def accel_launch_environment(config: dict) -> dict[str, str]:
    """``DS_ACCELERATOR=cpu`` for DeepSpeed jobs on the CPU; a stale op build lock fails the launch."""
    if str(config.get("distributed_type")) != "DEEPSPEED":
        return {}
    from .locks import check_extension_locks

    check_extension_locks()
    return {"DS_ACCELERATOR": "cpu"} if config.get("use_cpu") else {}


@hookimpl
def accel_config_questions(ask: Questions, config: dict[str, Any]) -> None:
    """``accel config`` questions for DeepSpeed (asked unless another strategy was chosen)."""
    from .options import DEEPSPEED_STRATEGY

    if DEEPSPEED_STRATEGY.chosen(ask, config):
        from .questions import ask_deepspeed

        config["deepspeed_config"] = ask_deepspeed(ask, int(config.get("num_machines") or 1))


@hookimpl
def accel_env_info() -> dict[str, str]:
    """A line for ``accel env``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("deepspeed")
    except PackageNotFoundError:
        found = "not installed"
    return {"DeepSpeed": found}
