"""Progress bars for long work: shown on the local main process only, and only on a terminal."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sized
from typing import TYPE_CHECKING, TypeVar

from accel import env_vars

if TYPE_CHECKING:
    from tqdm.auto import tqdm as Bar

T = TypeVar("T")


def _is_local_main_process() -> bool:
    from accel.state import PartialState

    shared = PartialState._shared_state
    if shared:
        return shared.get("local_process_index", 0) == 0
    return env_vars.world_info()[1] == 0


def progress_bar(
    items: Iterable[T], desc: str, unit: str = "it", total: int | None = None
) -> Iterable[T]:
    """``items`` wrapped in a tqdm bar when stderr is a terminal and this is the local main process.

    Elsewhere (a log file, CI, other ranks) ``items`` is returned unchanged, so nothing is printed.
    A single item gets no bar.
    """
    size = total if total is not None else (len(items) if isinstance(items, Sized) else None)
    if (size is not None and size <= 1) or not sys.stderr.isatty() or not _is_local_main_process():
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, unit=unit, total=size)


def tqdm(*args: object, main_process_only: bool = True, **kwargs: object) -> Bar:
    """``tqdm.auto.tqdm(*args, **kwargs)``, disabled on processes other than the local main one."""
    from tqdm.auto import tqdm as _tqdm

    if main_process_only:
        from accel.state import PartialState

        kwargs["disable"] = kwargs.get("disable", False) or not PartialState().is_local_main_process
    return _tqdm(*args, **kwargs)
