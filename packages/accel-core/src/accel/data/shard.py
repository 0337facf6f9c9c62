"""The prepared loaders themselves: :class:`DataLoaderShard` (each process reads its share)
and :class:`DataLoaderDispatcher` (the main process reads, every process gets its slice).

A prepared loader places batches on the device, marks the end of the epoch for gradient
accumulation and :meth:`~accel.Accelerator.gather_for_metrics`, and keeps its position
(``state_dict``/``load_state_dict``) so a run resumes inside an epoch, on the same number
of processes or another. :func:`accel.data.loader.prepare_data_loader` builds them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sized
from typing import TYPE_CHECKING, Any, cast

import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Sampler,
)

from accel.data.batches import EmptyBatch, EmptySafeCollate, empty_like, placer
from accel.data.loader_state import BaseDataLoader, DataLoaderStateMixin
from accel.data.samplers import (
    BatchSamplerShard,
    IterableDatasetShard,
    ResumableRandomSampler,
    SeedableRandomSampler,
    draw_seed,
)
from accel.elastic import position as positions
from accel.elastic.loader import GlobalPosition, rebatched
from accel.faults import preemption
from accel.state import GradientState, PartialState

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh
    from torch.utils.data import Dataset

    from accel.types import RNGType


class DataLoaderShard(GlobalPosition, DataLoaderStateMixin, DataLoader):
    """A DataLoader that places batches on the device, tracks the end of the epoch and can resume.

    ``state_dict()`` holds ``epoch`` and ``batches_yielded`` (plus ``seed``, the seed of a
    :class:`SeedableRandomSampler`, and ``sampler``, what a :class:`ResumableRandomSampler`'s
    order of that epoch was drawn from); after ``load_state_dict`` the next iteration
    continues where the saved one stopped, drawing nothing from the random generators that
    the saved iteration had drawn already. ``rng_types`` (Accelerate's) are synchronised
    from the main process when an epoch starts: ``"torch"``, ``"cuda"``, ``"xpu"`` and
    ``"generator"`` (``synchronized_generator``). ``use_stateful_dataloader=True`` builds
    the loader on torchdata's ``StatefulDataLoader`` (see :mod:`accel.data.stateful`).
    The constructor takes DataLoader's keywords (``batch_size``, ``shuffle``, ``generator``,
    ...) and Accelerate's: ``skip_batches`` (skipped on the first iteration only, as
    :func:`skip_first_batches` does), ``iteration`` (the epoch), ``_non_blocking``,
    ``_drop_last``.
    """

    _stateful = False
    base_dataloader = BaseDataLoader()

    @property
    def use_stateful_dataloader(self) -> bool:
        """Whether this loader is built on torchdata's ``StatefulDataLoader`` (Accelerate's attribute)."""
        return self._stateful

    def __new__(cls, *args: object, use_stateful_dataloader: bool = False, **kwargs: object):
        if use_stateful_dataloader and not cls._stateful:
            cls = _loader_class(cls, True)
        return super().__new__(cls)

    def __init__(
        self,
        dataset: Dataset[object],
        device: torch.device | None = None,
        *,
        seed: int | None = None,
        non_blocking: bool = False,
        use_stateful_dataloader: bool = False,
        rng_types: list[str | RNGType] | None = None,
        synchronized_generator: torch.Generator | None = None,
        skip_batches: int = 0,
        iteration: int = 0,
        _drop_last: bool = False,
        _non_blocking: bool = False,
        torch_device_mesh: DeviceMesh | None = None,
        **kwargs: Any,  # DataLoader's keywords, passed on as they are
    ):
        # Accelerate's keywords: skip_batches (here for the first iteration only, as
        # skip_first_batches), iteration (the epoch), _non_blocking, _drop_last; the rest
        # (batch_size, shuffle, generator, ...) are DataLoader's.
        if torch_device_mesh is not None:
            raise NotImplementedError(
                f"{type(self).__name__}(torch_device_mesh=...) is not supported by accel yet"
            )
        super().__init__(dataset, **kwargs)
        self.device = device
        self.seed = seed
        """The seed of the :class:`SeedableRandomSampler` inside, if any (``use_seedable_sampler``)."""
        self.non_blocking = non_blocking or _non_blocking
        self._drop_last = _drop_last
        self.rng_types = [str(getattr(t, "value", t)) for t in rng_types or ()]
        """RNGs copied from the main process when an epoch starts (several processes only)."""
        self.synchronized_generator = synchronized_generator
        """The generator that ``rng_types`` ``"generator"`` synchronises."""
        self.gradient_state = GradientState()
        self.epoch = iteration
        self.batches_yielded = 0
        self._resume_skip = 0
        self._explicit_skip = False  # _resume_skip came from skip_batches: it survives set_epoch
        self._restored: dict[str, positions.Drawn | None] | None = (
            None  # a mid-epoch position from load_state_dict
        )
        # where this epoch's iteration started in the global order: (samples, batches) before
        # the batches counted by batches_yielded; (0, 0) unless resumed on another layout
        self._origin: tuple[int, int] = (0, 0)
        self._resize: tuple[int, int] | None = None  # such an origin, for the next iteration
        self._replaying = False  # this iteration continues an epoch whose draws were made
        self._empty = None  # an empty batch shaped like the latest one (uneven last rounds)
        self.shards_per_process = 0
        """Processes whose datasets read their own shards (no global order), else 0."""
        if skip_batches:
            self.skip_batches(skip_batches)

    @property
    def iteration(self) -> int:
        """Accelerate's name of :attr:`epoch`: the epoch the next iteration draws its order for."""
        return self.epoch

    @iteration.setter
    def iteration(self, value: int) -> None:
        self.epoch = value

    # -- position ---------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose sample order the next iteration uses.

        Another epoch than the current one drops a restored mid-epoch position, not a skip
        asked for with :func:`skip_first_batches` (transformers' Trainer skips, then sets the
        epoch).
        """
        if epoch != self.epoch:
            self.batches_yielded = 0
            self._restored = None
            self._resize = None
            if not self._explicit_skip:
                self._resume_skip = 0
        self.epoch = epoch
        self._propagate_epoch()

    def state_dict(self) -> positions.Position:
        """The position in the epoch's global order (:mod:`accel.elastic.position`, version 2)."""
        try:
            finished = self.batches_yielded >= len(self) > 0
        except TypeError:  # iterable dataset without a length
            finished = False
        finished = finished or (self.end_of_dataloader and self.batches_yielded > 0)
        layout = self._layout()
        state: positions.Position = {
            "version": positions.VERSION,
            "num_processes": layout["num_processes"],
            "batch_size": layout["batch_size"],
            "global_order": not self.shards_per_process,
        }
        if layout["length"] is not None:
            state["length"] = layout["length"]
        if finished:  # saved right after the last batch: the next epoch starts at 0
            state.update(epoch=self.epoch + 1, batches_yielded=0, samples_seen=0, batches_seen=0)
            if layout["samples_per_step"] is None:
                state["samples_seen"] = None
            if layout["batches_per_step"] is None:
                state["batches_seen"] = None
        else:
            samples, batches = self._global_position(layout)
            state.update(
                epoch=self.epoch,
                batches_yielded=self.batches_yielded,
                samples_seen=samples,
                batches_seen=batches,
            )
        if self.seed is not None:
            state["seed"] = self.seed
        sampler = self._resumable()
        if sampler is not None:
            if state["batches_yielded"] or state["samples_seen"] or state["batches_seen"]:
                # inside the epoch: what its order was drawn from
                drawn = self._restored["sampler"] if self._restored else sampler.drawn
                if drawn is not None:
                    state["sampler"] = drawn.copy()
            elif sampler.generator is not None:  # between epochs: where the next one starts
                state["sampler"] = {"generator": sampler.generator.get_state()}
        return state

    def load_state_dict(self, state: positions.Position) -> None:
        """Resume at the saved position on the next iteration, also on another number of processes.

        A position saved on this layout (processes and batch size) resumes batch for batch.
        Saved on another one, the next iteration continues the epoch's global order at the
        saved sample (:mod:`accel.elastic.position`); :class:`~accel.errors.ResumeError` says
        why when this loader cannot.
        """
        state = positions.upgrade(state, self._layout()["num_processes"])
        self._check_length(state)
        if state.get("seed") is not None:
            self.seed = int(state["seed"])
        self.epoch = int(state["epoch"])
        self._explicit_skip = False
        self._resize = None
        self.end_of_dataloader = False
        drawn = state.get("sampler")
        if self._same_layout(state):
            self.batches_yielded = int(state["batches_yielded"])
            self._resume_skip = self.batches_yielded
            inside = self.batches_yielded > 0
        else:
            self._resize = self._resize_origin(state)
            self.batches_yielded = self._resume_skip = 0
            inside = any(self._resize)
        if inside:
            self._restored = {"sampler": drawn}
            return
        self._restored = None
        sampler = self._resumable()
        if drawn and "generator" in drawn and sampler is not None:
            if sampler.generator is None:  # saved where the order had a generator of its own
                sampler.generator = torch.Generator()
            sampler.generator.set_state(drawn["generator"])

    def skip_batches(self, num_batches: int) -> None:
        """Skip the first ``num_batches`` batches of the next iteration (replaces a restored position)."""
        self._resume_skip = num_batches
        self._explicit_skip = True
        self._resize = None
        self.batches_yielded = num_batches

    def _shard(self) -> BatchSamplerShard | None:
        """The :class:`BatchSamplerShard` this loader draws from (as batch sampler or as sampler)."""
        for candidate in (self.batch_sampler, self.sampler):
            if isinstance(candidate, BatchSamplerShard):
                return candidate
        return None

    def _resumable(self) -> ResumableRandomSampler | None:
        """The :class:`ResumableRandomSampler` the batches are drawn with, if any."""
        shard = self._shard()
        sampler = shard.sampler if shard is not None else get_sampler(self)
        return sampler if isinstance(sampler, ResumableRandomSampler) else None

    # -- sizes ------------------------------------------------------------
    @property
    def total_batch_size(self) -> int | None:
        """Samples per step across all processes."""
        sampler = self._shard()
        if sampler is not None:
            return sampler.total_batch_size
        if isinstance(self.dataset, IterableDatasetShard):
            ds = self.dataset
            return ds.batch_size if ds.split_batches else ds.batch_size * ds.num_processes
        return self.batch_size

    @property
    def total_dataset_length(self) -> int | None:
        """Length of the underlying dataset, when it has one."""
        dataset = (
            self.dataset.dataset if isinstance(self.dataset, IterableDatasetShard) else self.dataset
        )
        try:
            return len(cast("Sized", dataset))
        except TypeError:  # a dataset without a length
            return None

    def _final_remainder(self) -> int:
        """Real samples in the last round when it holds padding duplicates, else -1."""
        shard = self._shard()
        source = shard if shard is not None else self.dataset
        valid = getattr(source, "last_round_valid", -1)
        total = self.total_batch_size
        return valid if valid >= 0 and total is not None and valid < total else -1

    # -- iteration --------------------------------------------------------
    def _consumed(self) -> None:
        """Called as each batch is handed to the loop (stateful loaders record their state)."""

    def _start_epoch(self) -> int:
        restored, self._restored = self._restored, None
        self._replaying = restored is not None
        if restored is None:
            self._synchronize_rngs()
        self._propagate_epoch()
        if restored is not None:
            sampler = self._resumable()
            if sampler is not None:
                sampler.replay(restored.get("sampler"))
        shard = self._shard()
        skip, self._resume_skip, self._explicit_skip = self._resume_skip, 0, False
        self.batches_yielded = skip
        self._origin, self._resize = self._resize or (0, 0), None
        samples, batches = self._origin
        if shard is not None:
            shard.skip = skip  # skipped at the sampler: no data read
            shard.skip_samples, shard.start_batch = samples, batches
            return 0
        if isinstance(self.dataset, IterableDatasetShard):
            self.dataset.skip_samples = samples  # the stream is read up to there
            return skip
        if samples and not self.dispatches and self.batch_size:
            return samples // self.batch_size  # iterable datasets: skipped by reading
        return skip

    def _synchronize_rngs(self) -> None:
        """Copy the main process's ``rng_types`` to every process (Accelerate does it each epoch)."""
        if not self.rng_types or PartialState().num_processes == 1:
            return
        from accel.rng import synchronize_rng_state

        for rng_type in self.rng_types:
            if rng_type != "generator":
                synchronize_rng_state(rng_type)
            elif self.synchronized_generator is not None:
                synchronize_rng_state("generator", generator=self.synchronized_generator)

    def _propagate_epoch(self) -> None:
        """Give the epoch (and the seed) to every sampler, batch sampler and dataset that takes one."""
        shard = self._shard()
        targets = [self.batch_sampler, getattr(self.batch_sampler, "sampler", None), self.sampler]
        if shard is not None:  # a custom batch sampler (and its sampler) inside the shard
            targets += [shard.batch_sampler, shard.sampler]
        seen: set[int] = set()
        for target in (*targets, self.dataset):
            if target is None or id(target) in seen:
                continue
            seen.add(id(target))
            if isinstance(target, SeedableRandomSampler) and self.seed is not None:
                target.seed = self.seed  # a restored seed (load_state_dict) reaches the sampler
            set_epoch = getattr(target, "set_epoch", None)
            if callable(set_epoch) and not isinstance(target, BatchSamplerShard):
                set_epoch(self.epoch)

    def _batches(self, skip_by_reading: int) -> Iterator[object]:
        """This process's batches of the epoch, before device placement."""
        if self._replaying:
            # The interrupted run drew this epoch's base seed before it saved: draw it from a
            # generator of our own, so that the global one (restored) stays where it was.
            generator, self.generator = self.generator, torch.Generator()
            try:
                iterator = super().__iter__()
            finally:
                self.generator = generator
        else:
            iterator = super().__iter__()
        for _ in range(skip_by_reading):
            next(iterator, None)
        return iterator

    def _fill_empty(self, batch: object) -> object:
        """Replace an :class:`EmptyBatch` by a zero-row batch shaped like the real ones."""
        if not isinstance(batch, EmptyBatch):
            if isinstance(self.collate_fn, EmptySafeCollate):
                self._empty = empty_like(batch)
            return batch
        collate = self.collate_fn
        if self._empty is None and isinstance(collate, EmptySafeCollate):
            # no real batch seen yet: shape one from the first sample
            self._empty = empty_like(collate.collate_fn([self.dataset[0]]))
        return self._empty

    # DataLoader.__iter__ is declared to return torch's private iterator class; a prepared
    # loader yields its batches from a generator, as Accelerate's do
    def __iter__(self) -> Iterator[Any]:  # ty: ignore[incompatible-method-override]
        source = self._batches(self._start_epoch())
        if isinstance(self.collate_fn, EmptySafeCollate):
            source = map(self._fill_empty, source)
        # Decided once per epoch, not per batch: how batches are placed, whether a subclass
        # records consumed batches. The position counter is written to the instance dict
        # directly: DataLoader.__setattr__ costs more than the rest of a batch's bookkeeping.
        # The preemption handler is looked up here too: with preemption off, a batch costs no
        # call for it (a handler installed mid-epoch is seen from the next epoch).
        place = None if self.device is None else placer(self.device, self.non_blocking)
        cpu = self.device is not None and torch.device(self.device).type == "cpu"
        consumed = None if type(self)._consumed is DataLoaderShard._consumed else self._consumed
        handler = preemption.active()
        position = vars(self)
        self.begin()
        try:
            batches = iter(source)
            current: object = next(batches, _END)
            # the batch after the current one is read first, to know which batch is the last
            following: Iterator[object] = (
                itertools.chain(batches, _LAST) if current is not _END else iter(())
            )
            self.end_of_dataloader = current is _END
            for upcoming in following:
                if upcoming is _END:
                    self.end_of_dataloader = True
                    self.remainder = self._final_remainder()
                if place is not None:
                    if not cpu:
                        current = place(current)
                    elif type(current) in _SEQUENCES:  # checked here, without a call per batch
                        for item in cast("list[object] | tuple[object, ...]", current):
                            if type(item) is not _TENSOR or not item.is_cpu:
                                current = place(current)
                                break
                    elif type(current) is not _TENSOR or not current.is_cpu:
                        current = place(current)
                position["batches_yielded"] += 1
                if consumed is not None:
                    consumed()
                yield current
                if handler is not None and handler.pending:  # preemption_point(), inlined
                    handler.check()  # the ranks agree to stop after a step (opt-in)
                current = upcoming
            self.epoch += 1
            self.batches_yielded = 0
        finally:
            self.end()


_END = object()
_LAST = (_END,)
"""What :meth:`DataLoaderShard.__iter__` appends to an epoch's batches: the end marker."""
_TENSOR = torch.Tensor
_SEQUENCES = (list, tuple)
"""Batch types whose CPU tensors :meth:`DataLoaderShard.__iter__` checks in place: a CPU
tensor, or a list or tuple of them, needs no placement on the CPU."""


class DataLoaderDispatcher(DataLoaderShard):
    """The main process reads each global batch and sends every process its slice.

    For data sources that only one process should read, and Accelerate's default for iterable
    datasets. The global batch is ``batch_size * num_processes`` (``batch_size`` with
    ``split_batches``), cut in equal parts; as in Accelerate, a last batch that does not
    divide gives every process one row more, the missing ones taken from the epoch's first
    batch (unless ``drop_last``), and ``gather_for_metrics`` drops them (``even_batches``
    does not apply here).
    ``slice_fn(batch, slice)`` cuts a process's part (default: every tensor along
    the first dimension). ``num_processes`` / ``process_index`` are the data-parallel
    count and rank the batch is cut by (default: the whole world); under tensor or
    context parallelism every rank of one group gets the same part. The batch itself
    is broadcast from the main process to every rank.
    """

    dispatches = True

    def __init__(
        self,
        dataset: Dataset[object],
        split_batches: bool = False,
        *,
        even_batches: bool = True,
        slice_fn: Callable[[object, slice], object] | None = None,
        num_processes: int | None = None,
        process_index: int | None = None,
        **kwargs: Any,  # DataLoaderShard's and DataLoader's keywords, passed on
    ):
        super().__init__(dataset, **kwargs)
        self.split_batches = split_batches
        self.even_batches = even_batches
        self.slice_fn = slice_fn
        state = PartialState()
        self.num_processes = state.num_processes if num_processes is None else num_processes
        """Number of data-parallel parts each global batch is cut into."""
        self.process_index = state.process_index if process_index is None else process_index
        """Which part this process receives."""
        self._last_valid = -1
        self._first: object = None  # the epoch's first global batch: what pads its last one

    def state_dict(self) -> positions.Position:
        """The position, plus (inside an epoch) the first batch that pads the epoch's last one."""
        state = super().state_dict()
        if state["batches_yielded"] and not self._drop_last and self._first is not None:
            state["first_batch"] = self._first
        return state

    def load_state_dict(self, state: positions.Position) -> None:
        """Resume at the saved position, padding the last batch as the interrupted run would."""
        super().load_state_dict(state)
        self._first = state.get("first_batch")

    def _final_remainder(self) -> int:
        total = self.total_batch_size
        return self._last_valid if total is not None and 0 <= self._last_valid < total else -1

    def _batches(self, skip_by_reading: int) -> Iterator[object]:
        from accel.distributed.operations import (
            broadcast_object_list,
            concatenate,
            find_batch_size,
            slice_tensors,
        )

        n, rank = self.num_processes, self.process_index
        is_main = PartialState().is_main_process
        iterator = super()._batches(skip_by_reading) if is_main else None
        rows = self._origin[0] if self._shard() is None else 0
        if iterator is not None and rows:  # a stream resumed on another global batch size
            assert self.batch_size is not None  # a position counted in samples has one
            iterator = rebatched(iterator, rows, self.batch_size)
        if not is_main and not self._replaying:
            draw_seed(self.generator)  # the base seed every process's DataLoader iterator draws
        first = self._first if self.batches_yielded else None  # restored with a position
        while True:
            batch = next(iterator, _END) if iterator is not None else None
            batch = broadcast_object_list([None if batch is _END else batch])[0]
            if batch is None:
                return
            first = batch if first is None else first
            self._first = first
            real = find_batch_size(batch)
            if real is None:
                raise TypeError(
                    "dispatch_batches needs batches holding tensors with a batch dimension, "
                    f"got {type(batch).__name__}"
                )
            full = self.total_batch_size or real
            if real < full and self._drop_last:
                # drop_last drops a partial per-process batch (Accelerate's reading), or with
                # split_batches the whole partial batch (dropped by the main loader already)
                real -= real % (full // n)
                if not real:
                    return
                batch = slice_tensors(batch, slice(0, real))
            self._last_valid = real
            per = real // n
            if real % n and not self._drop_last:
                # the last batch: each process one more row, the missing ones from the epoch's
                # first batch (Accelerate's padding; gather_for_metrics drops them again)
                batch = concatenate([batch, slice_tensors(first, slice(0, n))])
                per += 1
            cut = self.slice_fn or slice_tensors
            yield cut(batch, slice(rank * per, (rank + 1) * per))


def get_sampler(dataloader: DataLoader) -> Sampler | None:
    """The sampler of ``dataloader``'s batch sampler (also when a BatchSampler is given as ``sampler=``)."""
    if isinstance(dataloader.sampler, BatchSampler):
        return getattr(dataloader.sampler, "sampler", None)
    return getattr(dataloader.batch_sampler, "sampler", None)


def _loader_class(base: type[DataLoaderShard], stateful: bool) -> type[DataLoaderShard]:
    if not stateful:
        return base
    from accel.data.stateful import stateful_loader_class

    return stateful_loader_class(base)


__all__ = ["DataLoaderDispatcher", "DataLoaderShard", "get_sampler"]
