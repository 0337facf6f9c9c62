"""Local mode: whether a library is configured, environment defaults, where the files go."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping

logger = logging.getLogger("accel.trackers")


def env_set(*names: str) -> bool:
    """Whether any of the environment variables ``names`` is set (even empty)."""
    return any(name in os.environ for name in names)


def any_file(paths: Iterable[str | None]) -> bool:
    """Whether any of ``paths`` (``~`` expanded) is an existing file."""
    return any(path and os.path.isfile(os.path.expanduser(path)) for path in paths)


def set_default_env(values: Mapping[str, str]) -> dict[str, str]:
    """Set the environment variables of ``values`` the user has not set; return those set."""
    applied = {}
    for name, value in values.items():
        if name not in os.environ:
            os.environ[name] = value
            applied[name] = value
    return applied


def local_dir(logging_dir: str | None, *parts: str) -> str:
    """``logging_dir/parts`` (or ``./parts``), absolute, created."""
    path = os.path.abspath(os.path.join(logging_dir or os.getcwd(), *parts))
    os.makedirs(path, exist_ok=True)
    return path


def announce_local(tracker: str, where: str, how_to_go_online: str) -> None:
    """Say, once per run, that ``tracker`` runs in local mode and how to change it."""
    logger.warning(
        "accel-trackers: %s runs offline (nothing configured it to send data anywhere); "
        "data is saved under %s. %s",
        tracker,
        where,
        how_to_go_online,
    )
