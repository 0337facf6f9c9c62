"""Entry-point module of accel-cli: makes the installed CLI visible to ``accel plugins`` and ``accel env``.

Imports nothing heavy: the hook reads the installed version only when ``accel env`` asks.
"""

from __future__ import annotations

from accel.hookspecs import hookimpl


@hookimpl
def accel_env_info() -> dict[str, str]:
    """The installed accel-cli version, for ``accel env``."""
    from accel.imports import installed_version

    missing = "not installed (running from source)"
    return {"accel-cli version": installed_version("accel-cli", missing=missing)}
