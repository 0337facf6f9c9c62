"""The config files a user names on the command line, checked before they are used.

Every command that takes ``--config_file`` (and ``to-fsdp2``'s ``--output_file``) goes
through these functions, so a path that cannot be used is the same usage error
everywhere: one line naming the option, the path and what to do (exit status 2).
"""

from __future__ import annotations

import os
from pathlib import Path

from accel.errors import UsageError


def config_to_read(value: str | os.PathLike, option: str = "--config_file") -> Path:
    """``value`` as the path of an existing, readable config file; a UsageError otherwise."""
    path = Path(value).expanduser()
    if path.is_dir():
        raise UsageError(
            f"{option} {value}: is a directory, not a config file; pass the YAML file inside it"
        )
    if not path.exists():
        raise UsageError(
            f"{option} {value}: the file does not exist; create it with `accel config` "
            "or fix the path"
        )
    if not os.access(path, os.R_OK):
        raise UsageError(f"{option} {value}: the file cannot be read (permission denied)")
    return path


def read_config(value: str | os.PathLike, option: str = "--config_file") -> dict[str, object]:
    """The mapping in the config file ``value`` names (a ConfigError, exit 2, when malformed)."""
    from accel.config.files import read_config_file

    return read_config_file(config_to_read(value, option))


def config_to_write(value: str | os.PathLike, option: str = "--config_file") -> Path:
    """``value`` as the path of a config file that can be written; a UsageError otherwise.

    The file itself may exist (the caller decides whether to replace it); the folders
    that do not exist yet are created when it is saved.
    """
    path = Path(value).expanduser()
    if path.is_dir():
        raise UsageError(
            f"{option} {value}: is a directory; name the file to write, "
            f"e.g. {path / 'default_config.yaml'}"
        )
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UsageError(f"{option} {value}: {folder} is a file, not a folder; fix the path")
    if not os.access(path if path.exists() else folder, os.W_OK):
        raise UsageError(f"{option} {value}: cannot write there (permission denied)")
    return path


__all__ = ["config_to_read", "config_to_write", "read_config"]
