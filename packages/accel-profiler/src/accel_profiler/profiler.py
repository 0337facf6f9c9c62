"""The context manager behind ``accelerator.profile()``: a torch profiler plus per-rank Chrome traces."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

from .kwargs import ProfileKwargs

if TYPE_CHECKING:
    import torch

TRACE_NAME = "profile_{rank}.json"
"""File name of a process's trace written when the profile ends."""
SCHEDULED_TRACE_NAME = "profile_{rank}_step{step}.json"
"""File name of a process's trace written each time a scheduled trace is ready."""


def trace_path(output_trace_dir: str | os.PathLike, rank: int, step: int | None = None) -> str:
    """Where process ``rank`` writes its Chrome trace (``step``: for a scheduled trace)."""
    name = (
        TRACE_NAME.format(rank=rank)
        if step is None
        else SCHEDULED_TRACE_NAME.format(rank=rank, step=step)
    )
    return os.path.join(os.fspath(output_trace_dir), name)


def _scheduled_handler(
    user_handler: Callable[[torch.profiler.profile], object] | None,
    output_trace_dir: str,
    rank: int,
) -> Callable[[torch.profiler.profile], None]:
    def on_trace_ready(prof: torch.profiler.profile) -> None:
        prof.export_chrome_trace(trace_path(output_trace_dir, rank, prof.step_num))
        if user_handler is not None:
            user_handler(prof)

    return on_trace_ready


@contextlib.contextmanager
def profile(
    profile_kwargs: ProfileKwargs | None = None,
    process_index: int = 0,
    wait_for_everyone: Callable[[], None] | None = None,
) -> Generator[torch.profiler.profile, None, None]:
    """Profile the ``with`` block; yields the running ``torch.profiler.profile``.

    With ``output_trace_dir``, process ``process_index`` writes its own Chrome trace there
    (see :func:`trace_path`); after the block, ``wait_for_everyone`` (if given) is called
    so every trace exists when the block returns on any process.
    """
    kwargs = profile_kwargs if profile_kwargs is not None else ProfileKwargs()
    output_dir = None if kwargs.output_trace_dir is None else os.fspath(kwargs.output_trace_dir)
    scheduled = kwargs.schedule_option is not None
    handler = None
    if output_dir is not None:
        os.makedirs(output_dir, exist_ok=True)
        if scheduled:
            handler = _scheduled_handler(kwargs.on_trace_ready, output_dir, process_index)
    # stacklevel 4: build -> this generator -> contextlib's __enter__ -> the user's `with` line
    profiler = kwargs.build(on_trace_ready=handler, stacklevel=4)
    with profiler:
        yield profiler
    if output_dir is not None:
        if not scheduled:
            profiler.export_chrome_trace(trace_path(output_dir, process_index))
        if wait_for_everyone is not None:
            wait_for_everyone()
