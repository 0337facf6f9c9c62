"""``accelerate.commands.config``: the configuration file, as transformers and TRL read it.

``default_config_file`` is accel's default location (a ``str``, like Accelerate's);
:func:`load_config_from_file` returns a :class:`ClusterConfig` (or :class:`SageMakerConfig`)
with Accelerate's attribute names and ``to_dict()``. Both also live in
:mod:`accelerate.commands.config.config_args`, Accelerate's module.
"""

from __future__ import annotations

from typing import Any

from .config_args import (
    BaseConfig,
    ClusterConfig,
    SageMakerConfig,
    default_config_file,
    load_config_from_file,
)

LoadedConfig = BaseConfig
"""The earlier name of the class of loaded configurations."""


def config_command(args: Any = None) -> int:
    """``accelerate config``: accel's interactive questionnaire."""
    from accel_cli.config_cmd import main

    return main(list(getattr(args, "accel_argv", []) or []), "accelerate config")


__all__ = [
    "BaseConfig",
    "ClusterConfig",
    "LoadedConfig",
    "SageMakerConfig",
    "config_command",
    "default_config_file",
    "load_config_from_file",
]
