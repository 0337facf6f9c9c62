"""How a prepared loader's position maps onto the epoch's global order, on any layout.

:class:`GlobalPosition` is the part of :class:`~accel.data.loader.DataLoaderShard` that counts
its batches in samples (and batch-sampler batches) of the global order, and that turns a
position saved on another number of processes or batch size into where this loader starts
(:mod:`accel.elastic.position` is the format).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sized
from typing import TYPE_CHECKING, TypedDict, TypeVar, cast

from torch.utils.data import IterableDataset, Sampler

from accel.data.samplers import BatchSamplerShard, IterableDatasetShard, sized_len

if TYPE_CHECKING:
    from torch.utils.data import Dataset

    from accel.elastic.position import Position

B = TypeVar("B")


class Layout(TypedDict):
    """How a loader's batches map onto the global order (see :meth:`GlobalPosition._layout`)."""

    num_processes: int
    batch_size: int | None
    samples_per_step: int | None
    batches_per_step: int | None
    epoch_samples: int | None
    epoch_batches: int | None
    length: int | None


class GlobalPosition:
    """Mixin of prepared loaders: the layout, the global position, and the origin of a resize."""

    dispatches = False
    """Whether the main process reads each global batch and sends the slices (the dispatcher)."""

    if TYPE_CHECKING:  # what the loader this mixes into (DataLoaderShard) provides
        dataset: Dataset[object]
        batch_size: int | None
        batches_yielded: int
        shards_per_process: int
        sampler: Sampler[object] | Iterable[object]
        _origin: tuple[int, int]
        _resize: tuple[int, int] | None

        def _shard(self) -> BatchSamplerShard | None: ...

    def _layout(self) -> Layout:
        """How this loader's batches map onto the global order.

        ``num_processes`` sharing it; ``batch_size`` of the global batch sampler (or of the
        stream's per-process batches); ``samples_per_step`` / ``batches_per_step``: how many
        samples / batch-sampler batches one batch of this process stands for globally (None
        where not countable); ``epoch_samples`` / ``epoch_batches``: their totals, if known;
        ``length``: how many samples the epoch's order is drawn over (the sampler's length;
        None for a stream).
        """
        shard = self._shard()
        if shard is not None:
            n = 1 if shard.split_batches else shard.num_processes
            per = shard.batch_size if shard.counts_samples else None
            try:
                total_batches: int | None = sized_len(shard.batch_sampler)
            except TypeError:
                total_batches = None
            return {
                "num_processes": getattr(self, "num_processes", shard.num_processes),
                "batch_size": shard.batch_size,
                "samples_per_step": None if per is None else per * n,
                "batches_per_step": n,
                "epoch_samples": shard.epoch_samples,
                "epoch_batches": total_batches,
                "length": _length(shard.sampler),
            }
        if isinstance(self.dataset, IterableDatasetShard):
            ds = self.dataset
            return {
                "num_processes": ds.num_processes,
                "batch_size": ds.batch_size,
                "samples_per_step": ds.round_size,
                "batches_per_step": None,
                "epoch_samples": None,
                "epoch_batches": None,
                "length": None,
            }
        counted = (
            isinstance(self.dataset, IterableDataset)
            and self.batch_size is not None
            and not self.shards_per_process
        )
        return {
            "num_processes": self.shards_per_process or getattr(self, "num_processes", 1),
            "batch_size": self.batch_size,
            "samples_per_step": self.batch_size if counted else None,
            "batches_per_step": None,
            "epoch_samples": None,
            "epoch_batches": None,
            "length": None if isinstance(self.dataset, IterableDataset) else _length(self.sampler),
        }

    def _check_length(self, state: Position) -> None:
        """Refuse a mid-epoch position counted over another number of samples than this loader's.

        The epoch's order (a permutation of the sampler's length) and the samples already
        consumed of it only hold for the length they were counted with; at an epoch boundary
        nothing of the old order is used, so another length is fine there.
        """
        from accel.errors import ResumeError

        saved, now = state.get("length"), self._layout()["length"]
        inside = (
            state.get("batches_yielded") or state.get("samples_seen") or state.get("batches_seen")
        )
        if saved is None or now is None or saved == now or not inside:
            return
        raise ResumeError(
            f"this data loader's position was counted over {saved} samples (epoch "
            f"{state.get('epoch', 0)}, mid-epoch) and this loader has {now}: the samples left "
            f"of that epoch cannot be found in another length; resume with the {saved}-sample "
            "dataset, or from a checkpoint saved at the end of an epoch"
        )

    def _global_position(self, layout: Layout) -> tuple[int | None, int | None]:
        """(samples, batch-sampler batches) of the epoch's global order consumed so far."""
        origin = self._resize if self._resize is not None else self._origin
        steps = self.batches_yielded
        samples = batches = None
        if layout["samples_per_step"] is not None:
            samples = origin[0] + steps * layout["samples_per_step"]
            if layout["epoch_samples"] is not None:
                samples = min(samples, layout["epoch_samples"])
        if layout["batches_per_step"] is not None:
            batches = origin[1] + steps * layout["batches_per_step"]
            if layout["epoch_batches"] is not None:
                batches = min(batches, layout["epoch_batches"])
        return samples, batches

    def _same_layout(self, state: Position) -> bool:
        layout = self._layout()
        saved_size = state.get("batch_size")
        return state.get("num_processes") in (None, layout["num_processes"]) and (
            saved_size is None or saved_size == layout["batch_size"]
        )

    def _resize_origin(self, state: Position) -> tuple[int, int]:
        """Where a position saved on another layout continues here: (samples, batches)."""
        from accel.errors import ResumeError

        layout = self._layout()
        saved_n = state.get("num_processes")
        shard = self._shard()
        if state.get("samples_seen") is None and state.get("batches_seen") is None:
            # version 1: this process's batches, counted on saved_n processes of this batch size
            steps = int(state.get("batches_yielded", 0))
            split = bool(getattr(shard if shard is not None else self.dataset, "split_batches", 0))
            per_step = 1 if split else saved_n or 0
            if not per_step or self.dispatches:
                raise ResumeError(
                    f"this data loader position was written by an older accel on {saved_n} "
                    f"processes and cannot be mapped onto {layout['num_processes']}: resume it "
                    f"on {saved_n} processes"
                )
            size = layout["batch_size"]
            counted = layout["samples_per_step"] is not None
            state = state.copy()
            state.update(
                batch_size=size,
                samples_seen=steps * per_step * cast(int, size) if counted else None,
                batches_seen=steps * per_step if shard is not None else None,
            )
        samples, batches = state.get("samples_seen"), state.get("batches_seen")
        if state.get("global_order") is False:
            samples = batches = None  # each process read its own shards
        where = (
            f"saved on {saved_n} processes with batch size {state.get('batch_size')}, "
            f"resumed on {layout['num_processes']} with batch size {layout['batch_size']}"
        )
        if hasattr(self, "_inner_state"):
            raise ResumeError(
                f"a use_stateful_dataloader position is torchdata's per-process state ({where}): "
                "resume it on the same number of processes, or without use_stateful_dataloader"
            )
        if shard is not None:
            if shard.counts_samples and samples is not None:
                return int(samples), 0
            if batches is not None and shard.batch_size == state.get("batch_size"):
                return 0, int(batches)
            raise ResumeError(
                f"this data loader's position cannot be continued here ({where}): its batch "
                "sampler yields whole batches, so keep the batch size, or resume on the same layout"
            )
        if samples is None or self.shards_per_process:
            raise ResumeError(
                f"this data loader's position counts no samples of a global order ({where}; "
                "a dataset that reads its own shards on each process has none): resume it on "
                "the same number of processes"
            )
        if (
            not isinstance(self.dataset, IterableDatasetShard)
            and not self.dispatches
            and samples % cast(int, layout["samples_per_step"])  # counted: the stream has no shards
        ):
            raise ResumeError(
                f"the stream position (sample {samples}) is not a multiple of this loader's "
                f"batch size {layout['batch_size']} ({where}): resume with a batch size that divides it"
            )
        return int(samples), 0


def _length(sampler: object) -> int | None:
    """``len(sampler)``, or None when it has none."""
    if not isinstance(sampler, Sized):
        return None
    try:
        return len(sampler)
    except TypeError:
        return None


def rebatched(batches: Iterator[B], drop: int, size: int) -> Iterator[B]:
    """``batches`` without their first ``drop`` rows, cut again into batches of ``size`` rows."""
    from accel.distributed.operations import concatenate, find_batch_size, slice_tensors

    carry = None
    for batch in batches:
        rows = find_batch_size(batch) or 0
        if drop >= rows:
            drop -= rows
            continue
        if drop:
            batch, drop = slice_tensors(batch, slice(drop, rows)), 0
        carry = batch if carry is None else concatenate([carry, batch])
        while (find_batch_size(carry) or 0) >= size:
            yield slice_tensors(carry, slice(0, size))
            carry = slice_tensors(carry, slice(size, None))
    if carry is not None and find_batch_size(carry):
        yield carry
