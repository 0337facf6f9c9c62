"""Prepared data loaders: device placement, sharding across processes, exact resume.

The order of samples is a pure function of ``(seed, epoch)``: a prepared loader
replaces a ``RandomSampler`` by :class:`SeedableRandomSampler` and gives the
DataLoader its own generator, so iterating never consumes the global RNG. The
position (epoch, batches already yielded) is part of the checkpoint, so a resumed
run sees exactly the batches an uninterrupted one would have seen.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    IterableDataset,
    RandomSampler,
    Sampler,
    default_collate,
)

from accel.distributed.operations import send_to_device
from accel.state import GradientState, PartialState

_LOADER_KWARGS = (
    "num_workers",
    "collate_fn",
    "pin_memory",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "prefetch_factor",
    "persistent_workers",
    "pin_memory_device",
    "in_order",
)


class SeedableRandomSampler(Sampler[int]):
    """A random permutation that depends only on ``seed + epoch``."""

    def __init__(self, num_samples: int, seed: int, epoch: int = 0):
        self.num_samples = num_samples
        self.seed = seed
        self.epoch = epoch

    def set_epoch(self, epoch: int) -> None:
        """Choose the permutation of ``epoch``."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        yield from torch.randperm(self.num_samples, generator=generator).tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSamplerShard(BatchSampler):
    """This process's batches of a batch sampler, and a number of leading batches to skip.

    Without ``split_batches`` process ``i`` takes batches ``i, i + n, i + 2n, ...``;
    with it, a slice of every batch. With ``even_batches`` the last round is
    completed with samples from the start so every process gets as many full
    batches as the others; the padding always comes after the real samples, so
    the real ones form a prefix of a gathered round (see :attr:`last_round_valid`).
    Without ``even_batches`` nothing is repeated: a process left with no sample
    in the last round gets an empty batch (``[]``), so every process still takes
    the same number of steps and collectives such as ``gather_for_metrics`` stay
    matched. ``join_uneven_inputs`` turns that off (:attr:`empty_batches`), since
    torch's ``Join`` lets processes stop early instead.
    """

    def __init__(
        self,
        batch_sampler: Any,
        num_processes: int = 1,
        process_index: int = 0,
        split_batches: bool = False,
        even_batches: bool = True,
    ):
        batch_size = getattr(batch_sampler, "batch_size", None)
        if split_batches and batch_size is not None and batch_size % num_processes != 0:
            raise ValueError(
                f"split_batches=True needs a batch size ({batch_size}) that is a multiple of the number of processes ({num_processes})"
            )
        self.batch_sampler = batch_sampler
        self.sampler = getattr(batch_sampler, "sampler", None)
        self.batch_size = batch_size
        self.drop_last = getattr(batch_sampler, "drop_last", False)
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches
        self.even_batches = even_batches
        self.skip = 0
        self.last_round_valid = 0
        self.empty_batches = True

    @property
    def total_batch_size(self) -> int | None:
        """Samples per step across all processes."""
        if self.batch_size is None:
            return None
        return self.batch_size if self.split_batches else self.batch_size * self.num_processes

    def __len__(self) -> int:
        base = len(self.batch_sampler)
        if self.split_batches or self.num_processes == 1:
            return base
        if self.drop_last:
            return base // self.num_processes
        if self.even_batches or self.empty_batches:
            return math.ceil(base / self.num_processes)
        return base // self.num_processes + (
            1 if self.process_index < base % self.num_processes else 0
        )

    def __iter__(self) -> Iterator[list[int]]:
        skip, self.skip = self.skip, 0
        for index, batch in enumerate(self._rounds()):
            if index >= skip:
                yield batch

    def _rounds(self) -> Iterator[list[int]]:
        n, rank = self.num_processes, self.process_index
        if n == 1:
            for batch in self.batch_sampler:
                self.last_round_valid = len(batch)
                yield list(batch)
            return
        if self.split_batches:
            yield from self._split_rounds(n, rank)
            return
        head: list[int] = []  # the first samples, to complete the last round
        pending: list[list[int]] = []
        full = self.batch_size
        for batch in self.batch_sampler:
            batch = list(batch)
            if full is None:
                full = len(batch)
            if len(head) < full * n:
                head.extend(batch[: full * n - len(head)])
            pending.append(batch)
            if len(pending) == n and all(len(b) == full for b in pending):
                self.last_round_valid = full * n
                yield pending[rank]
                pending = []
        if not pending or self.drop_last:
            return
        real = sum(len(b) for b in pending)
        self.last_round_valid = real
        if not self.even_batches:
            if rank < len(pending):
                yield pending[rank]
            elif self.empty_batches:
                yield []
            return
        flat = [i for b in pending for i in b]
        cycle = head or flat
        while len(flat) < full * n:
            flat.extend(cycle[: full * n - len(flat)])
        yield flat[rank * full : (rank + 1) * full]

    def _split_rounds(self, n: int, rank: int) -> Iterator[list[int]]:
        head: list[int] = []
        full = self.batch_size
        for batch in self.batch_sampler:
            batch = list(batch)
            if full is None:
                full = len(batch)
            if not head:
                head = list(batch)
            real = len(batch)
            self.last_round_valid = real
            if real < full:
                if self.drop_last:
                    return
                if self.even_batches:
                    while len(batch) < full:
                        batch.extend(head[: full - len(batch)])
                else:
                    per = math.ceil(real / n)
                    mine = batch[rank * per : (rank + 1) * per]
                    if mine or self.empty_batches:
                        yield mine
                    continue
            per = full // n
            yield batch[rank * per : (rank + 1) * per]


class IterableDatasetShard(IterableDataset):
    """This process's samples of an iterable dataset, in rounds of ``batch_size * num_processes``."""

    def __init__(
        self,
        dataset: IterableDataset,
        batch_size: int = 1,
        drop_last: bool = False,
        num_processes: int = 1,
        process_index: int = 0,
        split_batches: bool = False,
    ):
        if split_batches and batch_size % num_processes != 0:
            raise ValueError(
                f"split_batches=True needs a batch size ({batch_size}) that is a multiple of the number of processes ({num_processes})"
            )
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches
        self.last_round_valid = 0

    def set_epoch(self, epoch: int) -> None:
        """Forward the epoch to the wrapped dataset."""
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)

    def __iter__(self) -> Iterator[Any]:
        per = self.batch_size // self.num_processes if self.split_batches else self.batch_size
        round_size = per * self.num_processes
        start = self.process_index * per
        head: list[Any] = []
        buffer: list[Any] = []
        for item in self.dataset:
            buffer.append(item)
            if len(buffer) == round_size:
                if not head:
                    head = list(buffer)
                self.last_round_valid = round_size
                yield from buffer[start : start + per]
                buffer = []
        if buffer and not self.drop_last:
            self.last_round_valid = len(buffer)
            cycle = head or list(buffer)
            while len(buffer) < round_size:
                buffer.extend(cycle[: round_size - len(buffer)])
            yield from buffer[start : start + per]


class DataLoaderShard(DataLoader):
    """A DataLoader that places batches on the device, tracks the end of the epoch and can resume.

    ``state_dict()`` holds ``seed``, ``epoch`` and ``batches_yielded``; after
    ``load_state_dict`` the next iteration continues where the saved one stopped.
    """

    def __init__(
        self,
        dataset: Any,
        device: torch.device | None = None,
        seed: int = 0,
        non_blocking: bool = False,
        **kwargs: Any,
    ):
        generator = torch.Generator()
        generator.manual_seed(seed)
        super().__init__(dataset, generator=generator, **kwargs)
        self.device = device
        self.seed = seed
        self.non_blocking = non_blocking
        self.gradient_state = GradientState()
        self.epoch = 0
        self.batches_yielded = 0
        self._resume_skip = 0
        self.end_of_dataloader = False
        self.remainder = -1
        self._empty = None  # an empty batch shaped like the latest one (uneven last rounds)

    # -- position ---------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose sample order the next iteration uses."""
        if epoch != self.epoch:
            self.batches_yielded = 0
            self._resume_skip = 0
        self.epoch = epoch

    def state_dict(self) -> dict[str, int]:
        """The position: ``{"seed", "epoch", "batches_yielded"}``."""
        try:
            finished = self.batches_yielded >= len(self) > 0
        except TypeError:  # iterable dataset without a length
            finished = False
        if finished:  # saved right after the last batch: the next epoch starts at 0
            return {"seed": self.seed, "epoch": self.epoch + 1, "batches_yielded": 0}
        return {"seed": self.seed, "epoch": self.epoch, "batches_yielded": self.batches_yielded}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Resume at the saved position on the next iteration."""
        self.seed = int(state["seed"])
        self.epoch = int(state["epoch"])
        self.batches_yielded = int(state["batches_yielded"])
        self._resume_skip = self.batches_yielded

    def skip_batches(self, num_batches: int) -> None:
        """Skip the first ``num_batches`` batches of the next iteration (replaces a restored position)."""
        self._resume_skip = num_batches
        self.batches_yielded = num_batches

    # -- sizes ------------------------------------------------------------
    @property
    def total_batch_size(self) -> int | None:
        """Samples per step across all processes."""
        sampler = self.batch_sampler
        if isinstance(sampler, BatchSamplerShard):
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
            return len(dataset)
        except TypeError:
            return None

    def _final_remainder(self) -> int:
        """Real samples in the last round when it holds padding duplicates, else -1."""
        source = (
            self.batch_sampler
            if isinstance(self.batch_sampler, BatchSamplerShard)
            else self.dataset
        )
        valid = getattr(source, "last_round_valid", -1)
        total = self.total_batch_size
        return valid if valid >= 0 and total is not None and valid < total else -1

    # -- iteration --------------------------------------------------------
    def _consumed(self) -> None:
        """Called as each batch is handed to the loop (stateful loaders record their state)."""

    def _start_epoch(self) -> int:
        self.generator.manual_seed(self.seed + self.epoch)
        for target in (getattr(self.batch_sampler, "sampler", None), self.sampler, self.dataset):
            if isinstance(target, SeedableRandomSampler):
                target.seed = self.seed  # a restored seed (load_state_dict) reaches the sampler
            if target is not None and hasattr(target, "set_epoch"):
                target.set_epoch(self.epoch)
        skip, self._resume_skip = self._resume_skip, 0
        self.batches_yielded = skip
        if isinstance(self.batch_sampler, BatchSamplerShard):
            self.batch_sampler.skip = skip  # skipped at the sampler: no data read
            return 0
        return skip  # iterable datasets: skipped by reading

    def _batches(self, skip_by_reading: int) -> Iterator[Any]:
        """This process's batches of the epoch, before device placement."""
        iterator = super().__iter__()
        for _ in range(skip_by_reading):
            next(iterator, None)
        yield from iterator

    def _fill_empty(self, batch: Any) -> Any:
        """Replace an :class:`_EmptyBatch` by a zero-row batch shaped like the real ones."""
        if not isinstance(batch, _EmptyBatch):
            if isinstance(self.collate_fn, _EmptySafeCollate):
                self._empty = _empty_like(batch)
            return batch
        if self._empty is None:  # no real batch seen yet: shape one from the first sample
            self._empty = _empty_like(self.collate_fn.collate_fn([self.dataset[0]]))
        return self._empty

    def __iter__(self) -> Iterator[Any]:
        source = map(self._fill_empty, self._batches(self._start_epoch()))
        self.gradient_state._add_dataloader(self)
        self.end_of_dataloader = False
        self.remainder = -1
        try:
            current = next(source, _END)
            self.end_of_dataloader = current is _END
            while current is not _END:
                upcoming = next(source, _END)  # look ahead to know which batch is the last
                if upcoming is _END:
                    self.end_of_dataloader = True
                    self.remainder = self._final_remainder()
                if self.device is not None:
                    current = send_to_device(current, self.device, non_blocking=self.non_blocking)
                self.batches_yielded += 1
                self._consumed()
                yield current
                current = upcoming
            self.epoch += 1
            self.batches_yielded = 0
        finally:
            self.gradient_state._remove_dataloader(self)


_END = object()


class _EmptyBatch:
    """What :class:`_EmptySafeCollate` returns for an empty list of samples."""


class _EmptySafeCollate:
    """A collate function that lets an empty batch through as an :class:`_EmptyBatch` marker."""

    def __init__(self, collate_fn: Any):
        self.collate_fn = collate_fn

    def __call__(self, samples: Any) -> Any:
        if len(samples) == 0:
            return _EmptyBatch()
        return self.collate_fn(samples)


def _empty_like(batch: Any) -> Any:
    """A batch of the same structure as ``batch`` with no samples (tensors keep trailing dims)."""
    if isinstance(batch, torch.Tensor):
        return batch.new_empty((0, *batch.shape[1:]))
    if isinstance(batch, Mapping):
        return {key: _empty_like(value) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        nested = batch and all(isinstance(x, (torch.Tensor, Mapping, list, tuple)) for x in batch)
        if not nested:  # the batch dimension itself, e.g. a list of strings
            return type(batch)() if not hasattr(batch, "_fields") else []
        items = [_empty_like(x) for x in batch]
        return type(batch)(*items) if hasattr(batch, "_fields") else type(batch)(items)
    return batch


class DataLoaderDispatcher(DataLoaderShard):
    """The main process reads each global batch and sends every process its slice.

    For data sources that only one process should read. The global batch is
    ``batch_size * num_processes`` (``batch_size`` with ``split_batches``); with
    ``even_batches`` the last one is completed with samples from the first.
    """

    def __init__(
        self, dataset: Any, split_batches: bool = False, even_batches: bool = True, **kwargs: Any
    ):
        super().__init__(dataset, **kwargs)
        self.split_batches = split_batches
        self.even_batches = even_batches
        self._last_valid = -1
        self._first: Any = None  # the epoch's first global batch: what pads its last one

    def state_dict(self) -> dict[str, Any]:
        """The position, plus (inside an epoch) the first batch that pads the epoch's last one."""
        state = super().state_dict()
        if state["batches_yielded"] and self.even_batches and self._first is not None:
            state["first_batch"] = self._first
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at the saved position, padding the last batch as the interrupted run would."""
        super().load_state_dict(state)
        self._first = state.get("first_batch")

    def _final_remainder(self) -> int:
        total = self.total_batch_size
        return self._last_valid if total is not None and 0 <= self._last_valid < total else -1

    def _batches(self, skip_by_reading: int) -> Iterator[Any]:
        from accel.distributed.operations import (
            broadcast_object_list,
            concatenate,
            find_batch_size,
            slice_tensors,
        )

        state = PartialState()
        n, rank = state.num_processes, state.process_index
        iterator = super()._batches(skip_by_reading) if state.is_main_process else None
        first = self._first if self.batches_yielded else None  # restored with a position
        while True:
            batch = next(iterator, _END) if iterator is not None else None
            batch = broadcast_object_list([None if batch is _END else batch])[0]
            if batch is None:
                return
            first = batch if first is None else first
            self._first = first
            real = find_batch_size(batch)
            full = self.total_batch_size or real
            self._last_valid = real
            if real < full and self.even_batches:
                while find_batch_size(batch) < full:
                    need = full - find_batch_size(batch)
                    batch = concatenate([batch, slice_tensors(first, slice(0, need))])
                real_per = full // n
            else:
                real_per = math.ceil(real / n) if real < full else full // n
            yield slice_tensors(batch, slice(rank * real_per, (rank + 1) * real_per))


def _draw_seed(sampler: Any) -> int:
    generator = getattr(sampler, "generator", None)
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


def _seeded_batch_sampler(batch_sampler: Any, seed: int, batch_size: int | None = None) -> Any:
    """``batch_sampler`` with a RandomSampler replaced by a SeedableRandomSampler (and a new batch size)."""
    sampler = getattr(batch_sampler, "sampler", None)
    size = batch_size or getattr(batch_sampler, "batch_size", None)
    drop_last = getattr(batch_sampler, "drop_last", False)
    if (
        isinstance(sampler, RandomSampler)
        and not sampler.replacement
        and sampler._num_samples is None
    ):
        return BatchSampler(
            SeedableRandomSampler(len(sampler.data_source), seed),
            batch_size=size,
            drop_last=drop_last,
        )
    if batch_size is not None:
        return BatchSampler(sampler, batch_size=batch_size, drop_last=drop_last)
    return batch_sampler


def prepare_data_loader(
    dataloader: DataLoader,
    device: torch.device | None = None,
    num_processes: int | None = None,
    process_index: int | None = None,
    split_batches: bool = False,
    put_on_device: bool = False,
    even_batches: bool = True,
    data_seed: int | None = None,
    non_blocking: bool = False,
    dispatch_batches: bool = False,
    use_stateful_dataloader: bool = False,
) -> DataLoaderShard:
    """Rebuild ``dataloader`` as a :class:`DataLoaderShard` (or :class:`DataLoaderDispatcher`) for this process."""
    state = PartialState()
    n = state.num_processes if num_processes is None else num_processes
    rank = state.process_index if process_index is None else process_index
    kwargs = {k: getattr(dataloader, k) for k in _LOADER_KWARGS if hasattr(dataloader, k)}
    if kwargs.get("num_workers", 0) == 0:
        kwargs.pop("prefetch_factor", None)
        kwargs.pop("persistent_workers", None)
    dataset = dataloader.dataset
    iterable = isinstance(dataset, IterableDataset)
    sampler = None if iterable else getattr(dataloader.batch_sampler, "sampler", None)
    seed = data_seed if data_seed is not None else _draw_seed(sampler)
    if n > 1:
        seed = _agree_on_seed(seed)
    common = {
        "device": device if put_on_device else None,
        "seed": seed,
        "non_blocking": non_blocking,
    }
    batch_size = dataloader.batch_size
    if split_batches and batch_size is not None and batch_size % n != 0:
        raise ValueError(
            f"split_batches=True needs a batch size ({batch_size}) that is a multiple of the number of processes ({n})"
        )
    if dispatch_batches and n > 1:
        global_size = batch_size if split_batches or batch_size is None else batch_size * n
        if iterable:
            kwargs.update(batch_size=global_size, drop_last=dataloader.drop_last)
        else:
            kwargs["batch_sampler"] = BatchSamplerShard(
                _seeded_batch_sampler(dataloader.batch_sampler, seed, global_size)
            )
        return _loader_class(DataLoaderDispatcher, use_stateful_dataloader)(
            dataset, split_batches=split_batches, even_batches=even_batches, **common, **kwargs
        )
    if iterable:
        if n > 1:
            dataset = IterableDatasetShard(
                dataset, batch_size, dataloader.drop_last, n, rank, split_batches
            )
        per = batch_size // n if split_batches and batch_size else batch_size
        kwargs.update(batch_size=per, drop_last=dataloader.drop_last)
    else:
        batch_sampler = _seeded_batch_sampler(dataloader.batch_sampler, seed)
        kwargs["batch_sampler"] = BatchSamplerShard(
            batch_sampler, n, rank, split_batches, even_batches
        )
        if n > 1 and not even_batches:
            kwargs["collate_fn"] = _EmptySafeCollate(kwargs.get("collate_fn") or default_collate)
    return _loader_class(DataLoaderShard, use_stateful_dataloader)(dataset, **common, **kwargs)


def _loader_class(base: type, stateful: bool) -> type:
    if not stateful:
        return base
    from accel.data.stateful import stateful_loader_class

    return stateful_loader_class(base)


def _agree_on_seed(seed: int) -> int:
    from accel.distributed.operations import broadcast_object_list

    return broadcast_object_list([seed])[0]


def skip_first_batches(dataloader: DataLoader, num_batches: int = 0) -> DataLoader:
    """Make the next iteration of ``dataloader`` start after its first ``num_batches`` batches.

    For a prepared loader the batches are skipped at the sampler (no data is read)
    and the same loader is returned; a plain DataLoader is wrapped.
    """
    if isinstance(dataloader, DataLoaderShard):
        dataloader.skip_batches(num_batches)
        return dataloader
    return _SkippingLoader(dataloader, num_batches)


class _SkippingLoader:
    """A plain DataLoader whose first iteration skips ``num_batches`` batches."""

    def __init__(self, dataloader: DataLoader, num_batches: int):
        self.dataloader = dataloader
        self.num_batches = num_batches

    def __iter__(self) -> Iterator[Any]:
        for index, batch in enumerate(self.dataloader):
            if index >= self.num_batches:
                yield batch

    def __len__(self) -> int:
        return max(len(self.dataloader) - self.num_batches, 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.dataloader, name)


__all__ = [
    "BatchSamplerShard",
    "DataLoaderShard",
    "DataLoaderDispatcher",
    "IterableDatasetShard",
    "SeedableRandomSampler",
    "prepare_data_loader",
    "skip_first_batches",
]
