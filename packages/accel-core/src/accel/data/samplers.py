"""Samplers of prepared data loaders: seedable shuffling, per-process batch shards, skipping."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sized
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

import torch
from torch.utils.data import (
    BatchSampler,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
)

from accel.elastic.position import Drawn

if TYPE_CHECKING:
    from torch.utils.data import Sampler


def sized_len(obj: object) -> int:
    """``len(obj)`` of a duck-typed sampler or dataset; ``TypeError`` when it has no length."""
    return len(cast(Sized, obj))


@runtime_checkable
class _DrawsTensors(Protocol):
    """A sampler that hands out its order as tensors (:class:`ResumableRandomSampler`, ...)."""

    def index_tensors(self) -> Iterator[torch.Tensor]: ...


def draw_seed(generator: torch.Generator | None = None) -> int:
    """One 64-bit draw, the way torch seeds a sampler or a loader's workers (global generator by default)."""
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


def _random_tensors(
    generator: torch.Generator, n: int, num_samples: int, replacement: bool
) -> Iterator[torch.Tensor]:
    """The indices ``RandomSampler`` draws with ``generator``, as int64 tensors, drawn when needed.

    Without replacement: one permutation of ``n`` per full pass, then one more whose first
    ``num_samples % n`` indices end the order (drawn, like torch's, even when none is taken).
    With replacement: ``randint`` in blocks of 32, then the rest.
    """
    if replacement:
        for _ in range(num_samples // 32):
            yield torch.randint(high=n, size=(32,), dtype=torch.int64, generator=generator)
        rest = num_samples % 32
        yield torch.randint(high=n, size=(rest,), dtype=torch.int64, generator=generator)
        return
    for _ in range(num_samples // n):
        yield torch.randperm(n, generator=generator)
    yield torch.randperm(n, generator=generator)[: num_samples % n]


def _set_epoch(target: object, epoch: int) -> None:
    """Call ``target.set_epoch(epoch)`` when it has one (samplers and datasets may)."""
    set_epoch = getattr(target, "set_epoch", None)
    if callable(set_epoch):
        set_epoch(epoch)


def _order_from(
    tensors: Iterator[torch.Tensor], start: int, head: int
) -> tuple[list[int], Iterator[int]]:
    """The first ``head`` indices of an order, and an iterator over it from index ``start`` on.

    The passed-over indices stay in tensors: none becomes a Python int.
    """
    first: list[int] = []
    pending: list[torch.Tensor] = []  # the order from ``start``, as drawn so far
    for tensor in tensors:
        if len(first) < head:
            first.extend(tensor[: head - len(first)].tolist())
        if start < len(tensor):
            pending.append(tensor[start:])
            start = 0
        else:
            start -= len(tensor)
        if pending and len(first) >= head:
            break  # the rest of ``tensors`` is drawn when iterated
    # made Python ints a block at a time: the first batch does not wait for the whole rest
    blocks = (
        block for tensor in itertools.chain(pending, tensors) for block in tensor.split(1 << 16)
    )
    return first, itertools.chain.from_iterable(map(torch.Tensor.tolist, blocks))


class ResumableRandomSampler(RandomSampler):
    """torch's ``RandomSampler``, the same order from the same generators, that can repeat an epoch.

    Like torch's, an iteration without a ``generator`` draws a seed from the global torch
    generator (when its first index is taken) and shuffles with a generator of its own
    seeded with it; with a ``generator`` it shuffles with that one, continuing its stream.
    :attr:`drawn` says what the latest iteration's order came from (``{"seed": int}`` or
    ``{"generator": state}``, the generator's state when the iteration started);
    :meth:`replay` makes the next iteration take the order from such a record instead,
    drawing nothing from the global generator: how a prepared loader resumes inside an
    epoch whose draws were made before the checkpoint.
    """

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: torch.Generator | None = None,
    ):
        super().__init__(data_source, replacement, num_samples, generator)
        self.drawn: Drawn | None = None
        """What the latest iteration's order came from; None before the first one."""
        self._replay: Drawn | None = None

    @classmethod
    def like(
        cls, sampler: RandomSampler, generator: torch.Generator | None = None
    ) -> ResumableRandomSampler:
        """A sampler drawing as ``sampler`` does (``generator`` replaces its generator when given)."""
        return cls(
            sampler.data_source,
            sampler.replacement,
            sampler._num_samples,
            generator if generator is not None else sampler.generator,
        )

    def replay(self, drawn: Drawn | None) -> None:
        """Make the next iteration take its order from ``drawn`` (a :attr:`drawn` record)."""
        self._replay = drawn

    def __iter__(self) -> Iterator[int]:
        # The lists come through a C-level chain: no Python frame resumes per index, and
        # nothing is drawn before the first index is asked for (as with torch's sampler).
        return itertools.chain.from_iterable(map(torch.Tensor.tolist, self.index_tensors()))

    def index_tensors(self) -> Iterator[torch.Tensor]:
        """The iteration's order as int64 tensors (what iterating yields as ints), drawn as needed."""
        replay, self._replay = self._replay, None
        generator = self.generator
        if replay is not None and "generator" in replay:
            # an order drawn from a sampler generator (a run on several processes): this
            # sampler continues that generator, also where it had none of its own
            if generator is None:
                generator = self.generator = torch.Generator()
            generator.set_state(replay["generator"])
            self.drawn = {"generator": generator.get_state()}
        elif generator is None or replay is not None:
            # an order drawn from a seed: a new draw from the global generator, or the
            # recorded seed (a generator of this sampler's own, if any, stays untouched)
            seed = draw_seed() if replay is None else int(replay["seed"])
            self.drawn = {"seed": seed}
            generator = torch.Generator()
            generator.manual_seed(seed)
        else:
            self.drawn = {"generator": generator.get_state()}
        yield from _random_tensors(
            generator, len(self.data_source), self.num_samples, self.replacement
        )


class SeedableRandomSampler(RandomSampler):
    """A ``RandomSampler`` whose order depends only on ``initial_seed + epoch``.

    ``data_seed`` sets the seed; without it the seed is ``torch.initial_seed()`` at
    construction. A ``generator`` passed in is re-seeded before each iteration
    (otherwise the sampler makes its own), so every process drawing with the same
    seed and epoch gets the same permutation, drawn when the iteration's first index is
    taken. Each full iteration moves to the next epoch; :meth:`set_epoch` chooses one
    explicitly. Nothing is drawn from the global generator.
    """

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: torch.Generator | None = None,
        data_seed: int | None = None,
    ):
        super().__init__(data_source, replacement, num_samples, generator)
        self.initial_seed = int(data_seed) if data_seed is not None else torch.initial_seed()
        self.epoch = 0

    @property
    def seed(self) -> int:
        """The seed the permutation of epoch 0 is drawn with (``initial_seed``)."""
        return self.initial_seed

    @seed.setter
    def seed(self, value: int) -> None:
        self.initial_seed = int(value)

    def set_epoch(self, epoch: int) -> None:
        """Choose the permutation of ``epoch``."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        return itertools.chain.from_iterable(map(torch.Tensor.tolist, self.index_tensors()))

    def index_tensors(self) -> Iterator[torch.Tensor]:
        """The epoch's order as int64 tensors (what iterating yields as ints), drawn as needed."""
        if self.generator is None:
            self.generator = torch.Generator()
        self.generator.manual_seed(self.initial_seed + self.epoch)
        yield from _random_tensors(
            self.generator, len(self.data_source), self.num_samples, self.replacement
        )
        self.set_epoch(self.epoch + 1)  # a full iteration moves to the next epoch


class BatchSamplerShard(BatchSampler):
    """This process's batches of a batch sampler, and a number of leading batches to skip.

    Without ``split_batches`` process ``i`` takes batches ``i, i + n, i + 2n, ...``;
    with it, a slice of ``batch_size // n`` samples of every batch. With
    ``even_batches`` the last round is completed with samples from the start
    (whole batches when the batch sampler has no ``batch_size``) so every process
    gets as many full batches as the others; the padding always comes after the
    real samples, so the real ones form a prefix of a gathered round (see
    :attr:`last_round_valid`).

    Without ``even_batches`` nothing is repeated and nothing is dropped (unless the
    batch sampler has ``drop_last``): a process left without samples in the last
    round simply stops one batch earlier, as in Accelerate. Batch samplers that
    yield batches of varying sizes are sharded batch by batch. With
    :attr:`empty_batches` (``DataLoaderConfiguration(even_batches=False,
    empty_batches=True)``) such a process gets an empty batch (``[]``) instead, so
    every process takes the same number of steps and collectives such as
    ``gather_for_metrics`` stay matched.
    """

    def __init__(
        self,
        batch_sampler: Sampler[list[int]] | Iterable[list[int]],
        num_processes: int = 1,
        process_index: int = 0,
        split_batches: bool = False,
        even_batches: bool = True,
    ):
        batch_size = getattr(batch_sampler, "batch_size", None)
        if split_batches and (batch_size is None or batch_size % num_processes != 0):
            raise ValueError(
                f"split_batches=True needs a batch size ({batch_size}) that is a round multiple of the number of processes ({num_processes})"
            )
        self.batch_sampler = batch_sampler
        # the wrapped batch sampler's sampler and batch size, whatever they are (duck-typed)
        self.sampler: Sampler[int] | Iterable[int] | None = getattr(batch_sampler, "sampler", None)
        self.batch_size: int | None = batch_size
        self.drop_last = getattr(batch_sampler, "drop_last", False)
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches
        self.even_batches = even_batches
        self.skip = 0
        self.skip_samples = 0
        """Global sample offset for the next iteration (a resume on another number of processes)."""
        self.start_batch = 0
        """Global batch offset for the next iteration, for batch samplers of their own batches."""
        self.last_round_valid = 0
        self.empty_batches = False

    @property
    def total_batch_size(self) -> int | None:
        """Samples per step across all processes."""
        if self.batch_size is None:
            return None
        return self.batch_size if self.split_batches else self.batch_size * self.num_processes

    @property
    def _size(self) -> int:
        """The batch size, on the paths that need one (counted samples, split batches)."""
        if self.batch_size is None:
            raise TypeError(f"{type(self.batch_sampler).__name__} has no batch_size")
        return self.batch_size

    @property
    def total_length(self) -> int:
        """Batches of the wrapped batch sampler (all processes together)."""
        return sized_len(self.batch_sampler)

    def set_epoch(self, epoch: int) -> None:
        """Forward the epoch to the wrapped batch sampler and its sampler, when they take one."""
        for target in (self.batch_sampler, self.sampler):
            if target is not None:
                _set_epoch(target, epoch)

    def __len__(self) -> int:
        base = sized_len(self.batch_sampler)
        n = self.num_processes
        if self.split_batches or n == 1:
            return base
        if base % n == 0 or self.drop_last:
            return base // n
        if self.even_batches or self.empty_batches:
            return base // n + 1
        return base // n + (1 if self.process_index < base % n else 0)

    @property
    def counts_samples(self) -> bool:
        """Whether the batches are torch's ``BatchSampler`` over a sampler of known length.

        Then a position is a number of samples of the sampler's order, and an iteration can
        start at any sample (:attr:`skip_samples`); otherwise only at a batch (:attr:`start_batch`).
        """
        if type(self.batch_sampler) is not BatchSampler or not self.batch_size:
            return False
        try:
            sized_len(self.sampler)
        except TypeError:
            return False
        return True

    @property
    def epoch_samples(self) -> int | None:
        """Samples of the sampler's order that an epoch's batches hold (after ``drop_last``)."""
        if not self.counts_samples:
            return None
        length = sized_len(self.sampler)
        return length // self._size * self._size if self.drop_last else length

    def __iter__(self) -> Iterator[list[int]]:
        skip, self.skip = self.skip, 0
        samples, self.skip_samples = self.skip_samples, 0
        start, self.start_batch = self.start_batch, 0
        if skip and self.counts_samples:  # whole rounds: skipped as their samples, undrawn
            per_round = 1 if self.split_batches else self.num_processes
            samples, skip = skip * per_round * self._size, 0
        if samples or start:
            return self._resized(samples, start)
        if self.num_processes == 1 and self._fixed_batches():
            # One process, torch's BatchSampler over a sampler of known length: its batches
            # as they are (no Python frame per batch), the last one's size known in advance.
            batches = iter(self.batch_sampler)
            return itertools.islice(batches, skip, None) if skip else batches
        return self._skipping(skip)

    def _fixed_batches(self) -> bool:
        """For torch's BatchSampler over a sequential or random sampler: set :attr:`last_round_valid`."""
        if type(self.batch_sampler) is not BatchSampler or not isinstance(
            self.sampler, (SequentialSampler, RandomSampler)
        ):
            return False
        length, size = sized_len(self.sampler), self.batch_size
        if length and size:
            self.last_round_valid = size if self.drop_last else (length % size or size)
        return True

    def _skipping(self, skip: int) -> Iterator[list[int]]:
        for index, batch in enumerate(self._rounds(self.batch_sampler)):
            if index >= skip:
                yield batch

    def _resized(self, samples: int, start: int) -> Iterator[list[int]]:
        """This process's batches from global sample ``samples`` (or global batch ``start``) on.

        The epoch's order is drawn whole (the sampler's indices, no data read); the first
        ``samples`` indices are passed over at C speed and the rest are batched and sharded
        as on any epoch. The batches that pad an uneven last round are still the epoch's first.
        Nothing is drawn before the first batch is asked for (as with torch's samplers).
        """
        n = 1 if self.split_batches else self.num_processes
        if samples:
            size = self._size
            if isinstance(self.sampler, _DrawsTensors):  # the skipped indices stay in tensors
                head_indices, rest = _order_from(self.sampler.index_tensors(), samples, n * size)
            else:
                indices = iter(cast("Iterable[int]", self.sampler))
                head_indices = list(itertools.islice(indices, n * size))
                if samples < len(head_indices):
                    rest = itertools.chain(head_indices[samples:], indices)
                else:
                    rest = itertools.islice(indices, samples - len(head_indices), None)
            head = [head_indices[i : i + size] for i in range(0, len(head_indices), size)]
            batches: Iterable[list[int]] = _batched(rest, size, self.drop_last)
            head = [b for b in head if len(b) == self.batch_size or not self.drop_last]
        else:
            source = iter(self.batch_sampler)
            head = [list(b) for b in itertools.islice(source, n)]
            batches = itertools.chain(
                head[start:], itertools.islice(source, max(start - len(head), 0), None)
            )
        yield from self._rounds(batches, head)

    def _rounds(
        self, batches: Iterable[list[int]], head: list[list[int]] | None = None
    ) -> Iterator[list[int]]:
        n, rank = self.num_processes, self.process_index
        if n == 1:
            for batch in batches:
                self.last_round_valid = len(batch)
                yield list(batch)
            return
        if self.split_batches:
            yield from self._split_rounds(n, rank, batches, head)
        else:
            yield from self._whole_rounds(n, rank, batches, head)

    def _complete(self, batch: list[int]) -> bool:
        return self.batch_size is None or len(batch) == self.batch_size

    def _whole_rounds(
        self, n: int, rank: int, batches: Iterable[list[int]], first: list[list[int]] | None
    ) -> Iterator[list[int]]:
        # the epoch's first batches complete the last round (given when the epoch is resumed)
        head: list[list[int]] = list(first or [])
        known = first is not None
        current: list[list[int]] = []
        ready: list[list[int]] | None = None  # a full round, yielded once another batch shows up
        for batch in batches:
            batch = list(batch)
            if ready is not None:
                self.last_round_valid = sum(len(b) for b in ready)
                yield ready[rank]
                ready = None
            if not known and len(head) < n:
                head.append(batch)
            current.append(batch)
            if len(current) == n:
                ready, current = current, []
        last = ready if ready is not None else current
        if not last:
            return
        self.last_round_valid = sum(len(b) for b in last)
        if len(last) == n and all(self._complete(b) for b in last):
            yield last[rank]
            return
        if self.drop_last:
            return
        if not self.even_batches:
            if rank < len(last):
                yield last[rank]
            elif self.empty_batches:
                yield []
            return
        if not head:
            head = last
        if self.batch_size is None:  # batches of no fixed size: complete with whole first batches
            if rank < len(last):
                yield last[rank]
            else:
                yield list(head[(rank - len(last)) % len(head)])
            return
        full = self.batch_size
        flat = [i for b in last for i in b]
        cycle = [i for b in head for i in b]
        while len(flat) < full * n:
            flat.extend(cycle[: full * n - len(flat)])
        yield flat[rank * full : (rank + 1) * full]

    def _split_rounds(
        self, n: int, rank: int, batches: Iterable[list[int]], first: list[list[int]] | None
    ) -> Iterator[list[int]]:
        head: list[int] = list(first[0]) if first else []
        full = self._size
        per = full // n
        for batch in batches:
            batch = list(batch)
            if not head:
                head = list(batch)
            self.last_round_valid = len(batch)
            if len(batch) < full:
                if self.drop_last:
                    continue
                if self.even_batches:
                    while len(batch) < full:
                        batch.extend(head[: full - len(batch)])
                elif len(batch) <= per * rank:
                    if self.empty_batches:
                        yield []
                    continue
            yield batch[rank * per : (rank + 1) * per]


def _batched(indices: Iterator[int], size: int, drop_last: bool) -> Iterator[list[int]]:
    """``indices`` in lists of ``size`` (the last one shorter unless ``drop_last``)."""
    while True:
        batch = list(itertools.islice(indices, size))
        if len(batch) < size and (drop_last or not batch):
            return
        yield batch


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
                f"split_batches=True needs a batch size ({batch_size}) that is a round multiple of the number of processes ({num_processes})"
            )
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches
        self.last_round_valid = 0
        self.skip_samples = 0
        """Samples of the stream the next iteration passes over first (read, not yielded)."""

    @property
    def round_size(self) -> int:
        """Samples of the stream per round (one batch of every process)."""
        per = self.batch_size // self.num_processes if self.split_batches else self.batch_size
        return per * self.num_processes

    def set_epoch(self, epoch: int) -> None:
        """Forward the epoch to the wrapped dataset."""
        _set_epoch(self.dataset, epoch)

    def __iter__(self) -> Iterator[object]:
        per = self.batch_size // self.num_processes if self.split_batches else self.batch_size
        round_size = per * self.num_processes
        start = self.process_index * per
        head: list[object] = []
        buffer: list[object] = []
        items = iter(self.dataset)
        skip, self.skip_samples = self.skip_samples, 0
        if skip:  # a resumed epoch: the stream's start still pads the last round
            head = list(itertools.islice(items, min(skip, round_size)))
            for _ in itertools.islice(items, max(skip - round_size, 0)):
                pass
            if len(head) < round_size:
                head = []  # the stream ended within the first round: pad with the last one
        for item in items:
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


class SkipBatchSampler(BatchSampler):
    """The batches of ``batch_sampler`` after its first ``skip_batches`` ones, at every iteration."""

    def __init__(
        self, batch_sampler: Sampler[list[int]] | Iterable[list[int]], skip_batches: int = 0
    ):
        self.batch_sampler = batch_sampler
        self.sampler: Sampler[int] | Iterable[int] | None = getattr(batch_sampler, "sampler", None)
        self.batch_size: int | None = getattr(batch_sampler, "batch_size", None)
        self.drop_last = getattr(batch_sampler, "drop_last", False)
        self.skip_batches = skip_batches

    def set_epoch(self, epoch: int) -> None:
        """Forward the epoch to the wrapped batch sampler (and its sampler)."""
        for target in (self.batch_sampler, self.sampler):
            if target is not None:
                _set_epoch(target, epoch)

    def __iter__(self) -> Iterator[list[int]]:
        for index, batch in enumerate(self.batch_sampler):
            if index >= self.skip_batches:
                yield batch

    @property
    def total_length(self) -> int:
        """Batches of the wrapped batch sampler, skipped ones included."""
        return sized_len(self.batch_sampler)

    def __len__(self) -> int:
        return max(sized_len(self.batch_sampler) - self.skip_batches, 0)
