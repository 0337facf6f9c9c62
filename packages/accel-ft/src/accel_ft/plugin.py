"""Entry-point module of accel-ft: the backend, the launcher, ``ft_config`` and its flags.

Registering it imports neither torch nor torchft: each hook imports what it needs when it is
called.
"""

from __future__ import annotations

from typing import Any

from accel.hookspecs import hookimpl


@hookimpl
def accel_backends() -> list[type]:
    """The ``ft`` backend (selected by ``ACCEL_BACKEND=ft``, which ``accel launch --ft`` sets)."""
    from .backend import FTBackend

    return [FTBackend]


@hookimpl
def accel_launchers() -> list[type]:
    """The replica-group launcher (``accel launch --ft``)."""
    from .launcher import FTLauncher

    return [FTLauncher]


@hookimpl
def accel_config_sections() -> dict[str, Any]:
    """The ``ft_config`` section, declared in :data:`accel_ft.config.FT_SECTION`."""
    from .config import FT_SECTION

    return {FT_SECTION.key: FT_SECTION}


@hookimpl
def accel_launch_arguments(parser: Any) -> None:
    """``--ft`` and the ``--ft_*`` flags."""
    from .config import FT_SECTION

    FT_SECTION.add_arguments(parser)


@hookimpl
def accel_launch_environment(config: dict) -> dict[str, str]:
    """``ACCEL_BACKEND=ft`` for a ``--ft`` launch: the workers' Accelerator selects the backend."""
    from accel import env_vars

    from .launcher import ft_settings

    return {env_vars.BACKEND: "ft"} if ft_settings(config).get("use_ft") else {}


@hookimpl
def accel_env_info() -> dict[str, str]:
    """The installed torchft version."""
    from importlib import metadata

    try:
        return {"torchft": metadata.version("torchft")}
    except metadata.PackageNotFoundError:
        return {"torchft": "not installed (pip install accel-ft)"}
