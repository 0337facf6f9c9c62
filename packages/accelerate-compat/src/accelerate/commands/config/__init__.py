"""``accelerate.commands.config``: the configuration file, as transformers and TRL read it.

``default_config_file`` is accel's default location (a ``str``, like Accelerate's);
:func:`load_config_from_file` returns the file's settings with attribute access and
``to_dict()``.
"""

from __future__ import annotations

import os
from typing import Any

from accel.config.settings import default_config_file as _default_location
from accel.config.settings import load_config_file

default_config_file = str(_default_location())
"""The default configuration file (``accel config`` writes it)."""


class LoadedConfig:
    """A configuration file's settings: ``config.mixed_precision``, ``config.to_dict()``."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self._settings = dict(settings)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._settings.get(name)

    def to_dict(self) -> dict[str, Any]:
        """The settings as a dict (a copy)."""
        return dict(self._settings)

    def __repr__(self) -> str:
        return f"LoadedConfig({self._settings!r})"


def load_config_from_file(config_file: str | os.PathLike | None = None) -> LoadedConfig:
    """Read ``config_file`` (default: :data:`default_config_file`) and validate it.

    Raises ``FileNotFoundError`` when the file does not exist, as Accelerate does.
    """
    path = str(config_file) if config_file is not None else str(_default_location())
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"the config file {path} does not exist: create one with `accelerate config`"
        )
    return LoadedConfig(load_config_file(path, check_plugins=False))


def config_command(args: Any = None) -> int:
    """``accelerate config``: accel's interactive questionnaire."""
    from accel_cli.config_cmd import main

    return main(list(getattr(args, "accel_argv", []) or []), "accelerate config")
