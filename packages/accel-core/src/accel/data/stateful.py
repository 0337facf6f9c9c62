"""Prepared data loaders built on torchdata's ``StatefulDataLoader`` (``use_stateful_dataloader=True``).

The prepared loader then restores its position through torchdata's own state (sampler,
dataset and worker states) instead of skipping batches. accel's loaders read one batch
ahead (to know which batch is the last), so the torchdata state is recorded for every
batch as it is read and the one matching the batch last handed to the loop is saved.

``state_dict()`` is that torchdata state itself, as with Accelerate: the dict a
``StatefulDataLoader`` over the same batch sampler gives after as many batches (plus
``_iterator_finished`` set on the epoch's last batch, as Accelerate does), so a state saved
from one loads into the other. It names no epoch: after loading one, the next ``set_epoch``
sets the loader's epoch and keeps the position. ``position_state_dict()`` is accel's
position (epoch, the seed the epoch's order was drawn from, ...) with the torchdata state
under ``"stateful_dataloader"``: what ``save_state`` writes, so that a shuffled epoch
resumes in the same order. ``load_state_dict`` takes either.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from torch.utils.data import DataLoader

if TYPE_CHECKING:
    from torchdata.stateful_dataloader import StatefulDataLoader

_Loader = TypeVar("_Loader", bound=DataLoader)

_CHECKPOINT_KEYS = ("version", "num_processes", "batch_size", "samples_seen", "batches_seen")
"""What the checkpoint reader adds to a position without a version (a torchdata state)."""


def _yielded(state: Mapping[str, object]) -> int:
    """Batches of the epoch a torchdata state has handed out (0 when its epoch ended)."""
    if not state or state.get("_iterator_finished"):
        return 0
    if "_num_yielded" in state:  # no workers
        return int(cast(int, state["_num_yielded"]))
    snapshot = cast("Mapping[str, int]", state.get("_snapshot") or {})
    return int(snapshot.get("_snapshot_step", 0)) + int(
        cast(int, state.get("_steps_since_snapshot", 0))
    )


def stateful_base() -> type[StatefulDataLoader]:
    """torchdata's ``StatefulDataLoader``; ImportError saying what to install when torchdata is absent."""
    try:
        from torchdata.stateful_dataloader import StatefulDataLoader
    except ImportError as exc:
        raise ImportError(
            "DataLoaderConfiguration(use_stateful_dataloader=True) needs torchdata: "
            "pip install torchdata"
        ) from exc
    return StatefulDataLoader


def stateful_loader_class(base: type[_Loader]) -> type[_Loader]:
    """``base`` (:class:`~accel.data_loader.DataLoaderShard` or a subclass) on ``StatefulDataLoader``."""
    return _build(base, stateful_base())


@functools.cache
def _build(base: Any, stateful: Any) -> Any:  # a class on two bases chosen at run time: dynamic
    class StatefulLoader(base, stateful):
        __doc__ = f"{base.__name__} whose position is torchdata's ``StatefulDataLoader`` state."
        _stateful = True

        def __init__(self, *args: object, **kwargs: object):
            super().__init__(*args, **kwargs)
            self._read_states: deque[dict[str, object]] = deque()
            self._inner_state: dict[str, object] | None = None
            self._inner_resume = 0
            self._epoch_from_set_epoch = False

        def _batches(self, skip_by_reading: int) -> Iterator[object]:
            self._read_states.clear()
            for batch in super()._batches(skip_by_reading):
                self._read_states.append(stateful.state_dict(self))
                yield batch

        def _consumed(self) -> None:
            state = self._read_states.popleft()
            state["_iterator_finished"] = self.end_of_dataloader  # as Accelerate's loaders
            self._inner_state = state

        def _start_epoch(self) -> int:
            resumed, self._inner_resume = self._inner_resume, 0
            self._epoch_from_set_epoch = False
            skip = super()._start_epoch()
            self.batches_yielded = resumed  # the torchdata state puts the iterator there
            return skip

        def set_epoch(self, epoch: int) -> None:
            if self._epoch_from_set_epoch:  # a loaded torchdata state names no epoch: take this one
                self._epoch_from_set_epoch = False
                self.epoch = epoch
            super().set_epoch(epoch)

        def state_dict(self) -> dict[str, object]:
            """torchdata's state after the batch last handed to the loop (``{}`` before any).

            Equal to a ``StatefulDataLoader``'s over the same batches, as in Accelerate.
            """
            return dict(self._inner_state) if self._inner_state is not None else {}

        def position_state_dict(self) -> dict[str, object]:
            """accel's position plus, inside an epoch, torchdata's state (``stateful_dataloader``)."""
            position = base.state_dict(self)
            if position["batches_yielded"] == 0 or self._inner_state is None:
                return position
            return {**position, "stateful_dataloader": dict(self._inner_state)}

        def load_state_dict(self, state: dict[str, object]) -> None:
            """Resume where :meth:`state_dict` or :meth:`position_state_dict` was taken."""
            if "epoch" not in state:  # torchdata's state (this loader's, a StatefulDataLoader's)
                inner = {k: v for k, v in state.items() if k not in _CHECKPOINT_KEYS}
                self._restored = self._resize = None
                self._resume_skip = 0
                self.end_of_dataloader = False
                self.batches_yielded = self._inner_resume = _yielded(inner)
                self._epoch_from_set_epoch = True
                self._inner_state = inner or None
                stateful.load_state_dict(self, inner)
                return
            base.load_state_dict(self, state)
            self._epoch_from_set_epoch = False
            inner = state.get("stateful_dataloader")
            self._inner_state = inner
            if inner is not None:
                self._inner_resume, self._resume_skip = self._resume_skip, 0
                stateful.load_state_dict(self, inner)

    StatefulLoader.__name__ = StatefulLoader.__qualname__ = f"Stateful{base.__name__}"
    return StatefulLoader
