"""Prepared data loaders: device placement, sharding across processes, exact resume.

The sample order and the use of the random generators are Accelerate's (and so, on one
process, plain PyTorch's): every iteration draws the loader's base seed from the
DataLoader's ``generator`` (the global torch generator when it has none), a shuffling
sampler without a generator draws its seed from the global generator when the epoch
starts, and with ``use_seedable_sampler`` the order is a function of ``(seed, epoch)``.
What an epoch's order was drawn from is part of the loader's position, which is part of
the checkpoint: a run resumed inside an epoch sees exactly the batches an uninterrupted
one would have seen and draws nothing the interrupted run had already drawn, so the
dropout masks that follow are the same too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    IterableDataset,
    RandomSampler,
    default_collate,
)

from accel.data.batches import EmptySafeCollate
from accel.data.loader_state import BaseDataLoader, DataLoaderStateMixin
from accel.data.samplers import (
    BatchSamplerShard,
    IterableDatasetShard,
    ResumableRandomSampler,
    SeedableRandomSampler,
    SkipBatchSampler,
    draw_seed,
)
from accel.data.shard import DataLoaderDispatcher, DataLoaderShard, get_sampler
from accel.state import GradientState, PartialState

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh
    from torch.utils.data import Dataset, Sampler

    from accel.types import RNGType

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


def _with_sampler(
    batch_sampler: Sampler[list[int]] | Iterable[list[int]],
    sampler: Sampler[int] | None = None,
    batch_size: int | None = None,
    drop_last: bool | None = None,
) -> Sampler[list[int]] | Iterable[list[int]]:
    """torch's ``BatchSampler`` rebuilt around ``sampler`` and/or with ``batch_size`` / ``drop_last``.

    Only torch's own ``BatchSampler`` is rebuilt; a custom batch sampler is kept as it is.
    """
    if type(batch_sampler) is not BatchSampler or (
        sampler is None and batch_size is None and drop_last is None
    ):
        return batch_sampler
    return BatchSampler(
        sampler if sampler is not None else batch_sampler.sampler,
        batch_size=batch_size or batch_sampler.batch_size,
        drop_last=batch_sampler.drop_last if drop_last is None else drop_last,
    )


class _HasGenerator(Protocol):
    """A sampler of the user's with a ``generator`` attribute."""

    generator: torch.Generator | None


def _shuffling(
    sampler: object,
    num_processes: int,
    use_seedable_sampler: bool,
    data_seed: int | None,
    sharded: bool,
    replaceable: bool = True,
) -> tuple[Sampler[int] | None, int | None, torch.Generator | None]:
    """The sampler a prepared loader draws with, the seedable seed, and the generator to synchronise.

    As Accelerate: with ``use_seedable_sampler`` a ``RandomSampler`` becomes a
    :class:`SeedableRandomSampler` (seed ``data_seed``, else ``torch.initial_seed()``);
    otherwise, sharded over several processes, a sampler with an unset ``generator`` gets
    one seeded with a draw from the global generator now, and that generator is kept the
    same on every process. accel's difference: torch's own ``RandomSampler`` becomes a
    :class:`ResumableRandomSampler` (the same draws, resumable inside an epoch), and the
    seeds are agreed on here (from the main process), once. A sampler inside a custom batch
    sampler (not ``replaceable``) is kept, as its batch sampler is.
    """
    if not isinstance(sampler, RandomSampler) or (use_seedable_sampler and not replaceable):
        if not (sharded and num_processes > 1 and hasattr(sampler, "generator")):
            return None, None, None
        user = cast(_HasGenerator, sampler)
        if user.generator is None:  # a sampler of the user's: Accelerate sets it too
            user.generator = _seeded_generator(_agree_on_seed(draw_seed()))
        return None, None, user.generator
    if use_seedable_sampler:
        seed = data_seed if data_seed is not None else torch.initial_seed()
        if num_processes > 1:
            seed = _agree_on_seed(seed)
        seeded = SeedableRandomSampler(
            sampler.data_source,
            sampler.replacement,
            sampler._num_samples,
            generator=sampler.generator,
            data_seed=seed,
        )
        return seeded, seed, None
    generator = sampler.generator
    synchronized = generator  # the user's generator: copied from the main process each epoch
    if sharded and num_processes > 1 and generator is None:
        generator = _seeded_generator(_agree_on_seed(draw_seed()))
        synchronized = None  # ours, the same everywhere from the start
    if type(sampler) is RandomSampler and replaceable:
        return ResumableRandomSampler.like(sampler, generator), None, synchronized
    sampler.generator = generator  # a subclass keeps its own drawing (Accelerate sets it too)
    return None, None, synchronized


def _seeded_generator(seed: int) -> torch.Generator:
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator


def prepare_data_loader(
    dataloader: DataLoader,
    device: torch.device | None = None,
    num_processes: int | None = None,
    process_index: int | None = None,
    split_batches: bool = False,
    put_on_device: bool = False,
    rng_types: list[str | RNGType] | None = None,
    dispatch_batches: bool | None = None,
    even_batches: bool = True,
    slice_fn_for_dispatch: Callable[[object, slice], object] | None = None,
    use_seedable_sampler: bool = False,
    data_seed: int | None = None,
    non_blocking: bool = False,
    use_stateful_dataloader: bool = False,
    torch_device_mesh: DeviceMesh | None = None,
    *,
    empty_batches: bool = False,
) -> DataLoaderShard:
    """Rebuild ``dataloader`` as a :class:`DataLoaderShard` (or :class:`DataLoaderDispatcher`) for this process.

    Accelerate's signature and numbers: the same seed gives the same batches and the same
    draws from the global generator (see :func:`_shuffling`), and ``rng_types`` are
    synchronised each epoch as Accelerate does. Differences, on purpose: the position
    inside an epoch, and what the epoch's order was drawn from, are in the loader's
    ``state_dict`` (an exact resume); ``torch_device_mesh`` is not supported yet.
    ``empty_batches`` (accel only, with ``even_batches=False``): processes without samples
    in the last round get an empty batch, so every process takes the same number of steps.
    ``slice_fn_for_dispatch(batch, slice)`` replaces the slicing of dispatched batches.
    A DataLoader built with a ``BatchSampler`` as ``sampler=`` and ``batch_size=None``
    is sharded through that batch sampler.
    """
    if torch_device_mesh is not None:
        raise NotImplementedError(
            "prepare_data_loader(torch_device_mesh=...) is not supported by accel yet: "
            "shard the loader over the data-parallel processes only"
        )
    state = PartialState()
    n = state.num_processes if num_processes is None else num_processes
    rank = state.process_index if process_index is None else process_index
    kwargs = {k: getattr(dataloader, k) for k in _LOADER_KWARGS if hasattr(dataloader, k)}
    if kwargs.get("num_workers", 0) == 0:
        kwargs.pop("prefetch_factor", None)
        kwargs.pop("persistent_workers", None)
    dataset = dataloader.dataset
    iterable = isinstance(dataset, IterableDataset)
    if dispatch_batches is None:  # Accelerate's default: dispatch what has no sampler to shard
        dispatch_batches = put_on_device and iterable
    dispatch = bool(dispatch_batches)
    sampler_is_batch_sampler = not iterable and isinstance(dataloader.sampler, BatchSampler)
    # (a DataLoader without automatic batching, batch_size=None, has no batch sampler)
    original = cast(
        "Sampler[list[int]] | Iterable[list[int]]",
        dataloader.sampler if sampler_is_batch_sampler else dataloader.batch_sampler,
    )
    sampler, seed, synchronized = _shuffling(
        None if iterable else get_sampler(dataloader),
        n,
        use_seedable_sampler,
        data_seed,
        sharded=not dispatch,
        replaceable=type(original) is BatchSampler,
    )
    if iterable and not dispatch and n > 1:
        synchronized = getattr(dataset, "generator", None)
    common: dict[str, Any] = {
        "device": device if put_on_device else None,
        "seed": seed,
        "non_blocking": non_blocking,
        "use_stateful_dataloader": use_stateful_dataloader,
    }
    batch_size = (
        getattr(original, "batch_size", None) if sampler_is_batch_sampler else dataloader.batch_size
    )
    if split_batches and batch_size is not None and batch_size % n != 0:
        raise ValueError(
            f"split_batches=True needs a batch size ({batch_size}) that is a round multiple of the number of processes ({n})"
        )

    def place(shard: BatchSamplerShard) -> None:
        shard.empty_batches = empty_batches
        if sampler_is_batch_sampler:
            kwargs.update(sampler=shard, batch_size=None)
        else:
            kwargs["batch_sampler"] = shard

    if dispatch:
        # Accelerate's dispatcher leaves the DataLoader's generator out: every process draws
        # the iterator's base seed from the global generator.
        # The main process reads global batches; without split_batches Accelerate reads
        # per-process batches (drop_last drops only a partial one of those), so the dispatcher
        # applies drop_last to the last global batch itself.
        global_size = batch_size if split_batches or batch_size is None else batch_size * n
        global_drop = dataloader.drop_last if split_batches else False
        if iterable:
            kwargs.update(batch_size=global_size, drop_last=global_drop)
        else:
            place(BatchSamplerShard(_with_sampler(original, sampler, global_size, global_drop)))
        return DataLoaderDispatcher(
            dataset,
            _drop_last=dataloader.drop_last,
            split_batches=split_batches,
            even_batches=even_batches,
            slice_fn=slice_fn_for_dispatch,
            num_processes=n,
            process_index=rank,
            **common,
            **kwargs,
        )
    kwargs["generator"] = dataloader.generator
    own_shards = False
    if iterable:
        own_shards = n > 1 and not split_batches and _reads_own_shards(dataset, n)
        if own_shards:  # a Hugging Face iterable dataset: each process reads its own shards
            dataset = cast(_Shardable, dataset).shard(num_shards=n, index=rank)
        elif n > 1:
            dataset = IterableDatasetShard(
                dataset,
                # without a batch size, each item of the stream is one process's batch
                1 if batch_size is None else batch_size,
                dataloader.drop_last,
                n,
                rank,
                split_batches,
            )
        per = batch_size // n if split_batches and batch_size else batch_size
        kwargs.update(batch_size=per, drop_last=dataloader.drop_last)
    else:
        place(
            BatchSamplerShard(
                _with_sampler(original, sampler), n, rank, split_batches, even_batches
            )
        )
        if n > 1 and not even_batches and empty_batches and not sampler_is_batch_sampler:
            kwargs["collate_fn"] = EmptySafeCollate(kwargs.get("collate_fn") or default_collate)
    loader = DataLoaderShard(
        dataset,
        rng_types=list(rng_types) if rng_types is not None and n > 1 else None,
        synchronized_generator=synchronized,
        **common,
        **kwargs,
    )
    if own_shards:
        loader.shards_per_process = n
    return loader


class _Shardable(Protocol):
    """A Hugging Face ``datasets.IterableDataset`` (what :func:`_reads_own_shards` finds)."""

    def shard(self, num_shards: int, index: int) -> Dataset[object]: ...


def _reads_own_shards(dataset: object, num_processes: int) -> bool:
    """Whether ``dataset`` is a Hugging Face ``datasets.IterableDataset`` with a shard per process.

    Accelerate shards those natively (``dataset.shard``) instead of in rounds.
    """
    return (
        type(dataset).__module__.startswith("datasets.")
        and callable(getattr(dataset, "shard", None))
        and int(getattr(dataset, "n_shards", 0) or 0) >= num_processes
    )


def _agree_on_seed(seed: int) -> int:
    from accel.distributed.operations import broadcast_object_list

    return broadcast_object_list([seed])[0]


def skip_first_batches(dataloader: DataLoader, num_batches: int = 0) -> DataLoader:
    """A loader whose iteration starts after the first ``num_batches`` batches of ``dataloader``.

    For a prepared loader the batches are skipped at the sampler (no data is read,
    once: the next iteration only) and the same loader is returned. A plain
    map-style DataLoader is rebuilt on a :class:`SkipBatchSampler` (no data read
    either); a plain iterable one becomes a :class:`SkipDataLoader`.
    """
    if isinstance(dataloader, DataLoaderShard):
        dataloader.skip_batches(num_batches)
        return dataloader
    kwargs = {k: getattr(dataloader, k) for k in _LOADER_KWARGS if hasattr(dataloader, k)}
    if kwargs.get("num_workers", 0) == 0:
        kwargs.pop("prefetch_factor", None)
        kwargs.pop("persistent_workers", None)
    dataset = dataloader.dataset
    if isinstance(dataset, IterableDataset):
        return SkipDataLoader(
            dataset,
            skip_batches=num_batches,
            batch_size=dataloader.batch_size,
            drop_last=dataloader.drop_last,
            **kwargs,
        )
    if isinstance(dataloader.sampler, BatchSampler):
        sampler = SkipBatchSampler(dataloader.sampler, num_batches)
        return DataLoader(dataset, sampler=sampler, batch_size=None, **kwargs)
    # a DataLoader without automatic batching has no batch sampler: not one to skip batches of
    sampler = SkipBatchSampler(cast("Iterable[list[int]]", dataloader.batch_sampler), num_batches)
    return DataLoader(dataset, batch_sampler=sampler, **kwargs)


class SkipDataLoader(DataLoaderStateMixin, DataLoader):
    """A DataLoader whose every iteration skips its first ``skip_batches`` batches (by reading them).

    Prefer :func:`skip_first_batches` (or a prepared loader's position), which skips
    without reading when the dataset is map-style. ``use_stateful_dataloader=True``
    builds it on torchdata's ``StatefulDataLoader``. While it iterates it is the gradient
    state's active loader; as Accelerate's, it does not mark its last batch
    (``end_of_dataloader`` stays false: it reads no batch ahead).
    """

    base_dataloader = BaseDataLoader()

    def __new__(cls, *args: object, use_stateful_dataloader: bool = False, **kwargs: object):
        if use_stateful_dataloader and cls is SkipDataLoader:
            from accel.data.stateful import stateful_base

            cls = _stateful_skip_class(stateful_base())
        return super().__new__(cls)

    def __init__(
        self,
        dataset: Dataset[object],
        skip_batches: int = 0,
        use_stateful_dataloader: bool = False,
        **kwargs: Any,  # DataLoader's keywords, passed on as they are
    ):
        super().__init__(dataset, **kwargs)
        self.skip_batches = skip_batches
        self.gradient_state = GradientState()

    # DataLoader.__iter__ is declared to return torch's private iterator class; a prepared
    # loader yields its batches from a generator, as Accelerate's do
    def __iter__(self) -> Iterator[Any]:  # ty: ignore[incompatible-method-override]
        self.begin()
        try:
            for index, batch in enumerate(super().__iter__()):
                if index >= self.skip_batches:
                    yield batch
        finally:
            self.end()

    def __len__(self) -> int:
        return max(super().__len__() - self.skip_batches, 0)


_STATEFUL_SKIP: dict[type, type] = {}


def _stateful_skip_class(stateful: type) -> type:
    if stateful not in _STATEFUL_SKIP:
        _STATEFUL_SKIP[stateful] = type(
            "StatefulSkipDataLoader",
            (SkipDataLoader, stateful),
            {"__doc__": "SkipDataLoader on torchdata's StatefulDataLoader."},
        )
    return _STATEFUL_SKIP[stateful]


__all__ = [
    "BatchSamplerShard",
    "DataLoaderShard",
    "DataLoaderDispatcher",
    "DataLoaderStateMixin",
    "IterableDatasetShard",
    "ResumableRandomSampler",
    "SeedableRandomSampler",
    "SkipBatchSampler",
    "SkipDataLoader",
    "get_sampler",
    "prepare_data_loader",
    "skip_first_batches",
]
