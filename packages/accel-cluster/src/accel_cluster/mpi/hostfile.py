"""MPI host files: one host per line, Open MPI style (``host slots=4``) or MPICH style (``host:4``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from accel.errors import ConfigError

KEY = "mpirun_config.mpirun_hostfile"


@dataclass(frozen=True)
class Host:
    """One line of a host file."""

    name: str
    slots: int | None = None
    """Processes the line allows on the host (None: not given)."""


def read_hostfile(path: str | Path) -> list[Host]:
    """The hosts of ``path``, in order; ConfigError naming the key, the line and the fix."""
    path = Path(path).expanduser()
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise ConfigError(
            f"{KEY}: {path} {what}; write a host file (one `host slots=N` or `host:N` per line) "
            "or fix the path given to --mpirun_hostfile"
        )
    hosts: list[Host] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([\w.\-]+)(?::(\d+))?((?:\s+\w+=\S+)*)", line)
        if not match:
            raise ConfigError(
                f"{KEY}: {path}:{number}: cannot read {raw.strip()!r}; expected `host`, "
                "`host slots=N` or `host:N`"
            )
        slots = int(match.group(2)) if match.group(2) else None
        for option in match.group(3).split():
            name, _, value = option.partition("=")
            if name in ("slots", "max_slots", "max-slots"):
                if not value.isdigit() or int(value) < 1:
                    raise ConfigError(f"{KEY}: {path}:{number}: {option} is not a positive count")
                if name == "slots":
                    slots = int(value)
        hosts.append(Host(match.group(1), slots))
    if not hosts:
        raise ConfigError(f"{KEY}: {path} lists no host; add one host per line")
    return hosts


__all__ = ["Host", "KEY", "read_hostfile"]
