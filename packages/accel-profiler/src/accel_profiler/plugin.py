"""Entry-point module of accel-profiler: implements ``accel_profile``. Imports nothing heavy."""

from __future__ import annotations

from typing import Any

from accel.hookspecs import hookimpl
from accel.lazy import catalog_exports


@hookimpl
def accel_profile(run: Any, profile_kwargs: Any) -> Any:
    """A context manager running ``torch.profiler.profile`` configured by ``profile_kwargs``
    (``run``: core's :class:`~accel.checkpoint.view.RunView`)."""
    from .profiler import profile

    return profile(
        profile_kwargs,
        process_index=run.process_index,
        wait_for_everyone=run.wait_for_everyone,
    )


@hookimpl
def accel_env_info() -> dict[str, str]:
    """A line for ``accel env``."""
    return {"Profiler": "accel-profiler (torch.profiler)"}


@hookimpl
def accel_exports() -> dict[str, str]:
    """``ProfileKwargs`` under ``accel`` / ``accel.utils``.

    The rows of :data:`accel.catalog.EXPORTS` for this distribution, each served by
    ``accel_profiler``'s lazy names.
    """
    return catalog_exports("accel-profiler", "accel_profiler")
