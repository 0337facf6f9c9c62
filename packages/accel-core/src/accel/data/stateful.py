"""Prepared data loaders built on torchdata's ``StatefulDataLoader`` (``use_stateful_dataloader=True``).

The prepared loader then restores its position through torchdata's own state (sampler,
dataset and worker states) instead of skipping batches. accel's loaders read one batch
ahead (to know which batch is the last), so the torchdata state is recorded for every
batch as it is read and the one matching the batch last handed to the loop is saved.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Iterator
from typing import Any


def stateful_base() -> type:
    """torchdata's ``StatefulDataLoader``; ImportError saying what to install when torchdata is absent."""
    try:
        from torchdata.stateful_dataloader import StatefulDataLoader
    except ImportError as exc:
        raise ImportError(
            "DataLoaderConfiguration(use_stateful_dataloader=True) needs torchdata: "
            "pip install torchdata"
        ) from exc
    return StatefulDataLoader


def stateful_loader_class(base: type) -> type:
    """``base`` (:class:`~accel.data_loader.DataLoaderShard` or a subclass) on ``StatefulDataLoader``."""
    return _build(base, stateful_base())


@functools.cache
def _build(base: type, stateful: type) -> type:
    class StatefulLoader(base, stateful):
        __doc__ = f"{base.__name__} whose position is torchdata's ``StatefulDataLoader`` state."
        _stateful = True

        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            self._read_states: deque = deque()
            self._inner_state: dict | None = None
            self._inner_resume = 0

        def _batches(self, skip_by_reading: int) -> Iterator[Any]:
            self._read_states.clear()
            for batch in super()._batches(skip_by_reading):
                self._read_states.append(stateful.state_dict(self))
                yield batch

        def _consumed(self) -> None:
            self._inner_state = self._read_states.popleft()

        def _start_epoch(self) -> int:
            resumed, self._inner_resume = self._inner_resume, 0
            skip = super()._start_epoch()
            self.batches_yielded = resumed  # the torchdata state puts the iterator there
            return skip

        def state_dict(self) -> dict[str, Any]:
            """accel's position plus, inside an epoch, torchdata's loader state."""
            position = base.state_dict(self)
            if position["batches_yielded"] == 0 or self._inner_state is None:
                return position
            return {**position, "stateful_dataloader": self._inner_state}

        def load_state_dict(self, state: dict[str, Any]) -> None:
            """Resume where :meth:`state_dict` was taken."""
            base.load_state_dict(self, state)
            inner = state.get("stateful_dataloader")
            if inner is not None:
                self._inner_resume, self._resume_skip = self._resume_skip, 0
                self._inner_state = inner
                stateful.load_state_dict(self, inner)

    StatefulLoader.__name__ = StatefulLoader.__qualname__ = f"Stateful{base.__name__}"
    return StatefulLoader
