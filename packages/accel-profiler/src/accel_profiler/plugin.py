"""Entry-point module of accel-profiler: implements ``accel_profile``. Imports nothing heavy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.hookspecs import hookimpl
from accel.lazy import catalog_exports

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from accel.checkpoint.view import RunView

    from .kwargs import ProfileKwargs


@hookimpl
def accel_profile(run: RunView, profile_kwargs: ProfileKwargs | None) -> AbstractContextManager:
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
