"""Automatic micro-batching: a batch that runs out of memory is split and retried, with its exact gradient.

:meth:`Accelerator.train_step <accel.Accelerator.train_step>` runs the user's step (forward,
loss, ``accelerator.backward``) on a whole batch. When any process runs out of memory, every
process drops the gradients of that attempt and runs the *same* batch again in twice as many
micro-batches, each loss weighted so that the summed gradient is the whole batch's. The split is
kept (and saved in checkpoints) and tried larger again after a number of steps.

Every process agrees on each attempt's outcome before any gradient is reduced: the micro-batches
run under the backend's ``no_sync``, and the processes exchange a small all-reduce before each
backward, before each forward of the modules the backend names (FSDP2's units, whose forward
starts with an all-gather) and at the end of the attempt (:class:`_Agreement`). See
docs/fitting-the-machine.md.
"""

from __future__ import annotations

import contextlib
import gc
import math
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, SupportsFloat, TypeVar, cast

import torch

from accel.config.core_options import CORE_SECTION
from accel.config.launched import launched_config
from accel.errors import AccelError, UsageError
from accel.logging import get_logger
from accel.memory import clear_device_cache, should_reduce_batch_size

if TYPE_CHECKING:
    from accel.backends.base import Backend
    from accel.backends.context import BackendContext

logger = get_logger(__name__)

REDUCTIONS = ("mean", "sum")
"""How the step's loss is reduced over its micro-batch (``train_step(reduction=...)``)."""


_Mark = TypeVar("_Mark")
_Batch = TypeVar("_Batch")


class RewindableCounter(Protocol[_Mark]):
    """Something that counts a step's work and can forget a failed attempt's share."""

    def mark(self) -> _Mark:
        """The counts now."""
        ...

    def rewind(self, mark: _Mark) -> None:
        """Go back to the counts of ``mark``."""


class MicroBatchOutOfMemoryError(AccelError, RuntimeError):
    """A micro-batch of one sample does not fit in memory: the run cannot go on as configured."""


class _PeerOutOfMemory(RuntimeError):
    """Another process ran out of memory in this attempt (raised at an agreement point)."""


def grow_after_setting() -> int:
    """Steps after which a split is tried larger again: the ``micro_batch_grow_after`` setting.

    ``ACCEL_MICRO_BATCH_GROW_AFTER``, else what ``accel launch`` resolved (its flag or the
    config file), else the declared default; converted by the declaration.
    """
    option = CORE_SECTION["micro_batch_grow_after"]
    value = option.from_env(default=None)
    if value is not None:
        return value
    launched = launched_config().get(option.name)
    if launched is not None:
        return option.convert(launched, f"{option.name} (accel launch)")
    return option.default


# -- splitting a batch ----------------------------------------------------------------
def batch_length(batch: object) -> int:
    """Number of samples of ``batch``: the first dimension of its first tensor (nested structures)."""
    found = _first_tensor(batch)
    if found is None or found.dim() == 0:
        raise UsageError(
            "train_step needs a batch holding tensors with a batch dimension "
            f"(a tensor, or a dict / list / tuple of them), not {type(batch).__name__}"
        )
    return int(found.shape[0])


def _first_tensor(data: object) -> torch.Tensor | None:
    if isinstance(data, torch.Tensor):
        return data
    if isinstance(data, Mapping):
        data = list(data.values())
    if isinstance(data, (list, tuple)):
        for value in data:
            found = _first_tensor(value)
            if found is not None:
                return found
    return None


def _grad_tensors(data: object) -> list[torch.Tensor]:
    """The tensors of ``data`` (nested dicts, lists, tuples) that require a gradient."""
    if isinstance(data, torch.Tensor):
        return [data] if data.requires_grad else []
    if isinstance(data, Mapping):
        data = list(data.values())
    if isinstance(data, (list, tuple)):
        return [t for value in data for t in _grad_tensors(value)]
    return []


def _slice(data: object, start: int, stop: int, length: int) -> object:
    """``data`` with every tensor whose first dimension is ``length`` cut to ``[start:stop]``.

    Containers are rebuilt as their own type (a mapping that cannot be: a dict).
    """
    if isinstance(data, torch.Tensor):
        return data[start:stop] if data.dim() > 0 and data.shape[0] == length else data
    if isinstance(data, Mapping):
        mapped = {k: _slice(v, start, stop, length) for k, v in data.items()}
        try:
            return _rebuild(data, mapped)
        except TypeError:
            return mapped
    if isinstance(data, (list, tuple)):
        items = [_slice(v, start, stop, length) for v in data]
        if hasattr(data, "_fields"):  # a namedtuple
            return _rebuild(data, *items)
        return _rebuild(data, items)
    return data


def _rebuild(like: object, *args: object) -> object:
    """A new container of ``like``'s own type, made from ``args``."""
    kind = cast("Callable[..., object]", type(like))  # its constructor, whatever its signature
    return kind(*args)


def split_batch(batch: _Batch, parts: int) -> list[tuple[_Batch, int]]:
    """``batch`` cut into ``parts`` consecutive micro-batches as even as possible, with their sizes.

    Every sample is in exactly one micro-batch, in order; non-tensor leaves and tensors without
    the batch dimension are given whole to each micro-batch.
    """
    length = batch_length(batch)
    parts = max(1, min(parts, length))
    base, extra = divmod(length, parts)
    pieces: list[tuple[_Batch, int]] = []
    start = 0
    for index in range(parts):
        size = base + (1 if index < extra else 0)
        # the same structure as ``batch`` (``_slice`` rebuilds each container as its type)
        pieces.append((cast(_Batch, _slice(batch, start, start + size, length)), size))
        start += size
    return pieces


# -- agreeing across processes ----------------------------------------------------------
class _Agreement:
    """The collective that makes every process see the same outcome of an attempt.

    Each process calls :meth:`point` before each backward and before each forward of the
    backend's :meth:`~accel.backends.base.Backend.agreement_modules`, and :meth:`outcome` once at
    the end of its attempt (failed or not). Both are all-reduces (a sum) of ``[failed, finished]``: a point
    sends ``[0, 0]`` and raises :class:`_PeerOutOfMemory` when it sees a failure; the end sends
    ``[failed, 1]`` until every process has finished. The calls pair up in order whatever the
    number of micro-batches of each process, so no process waits in a collective another
    process never enters, and every process leaves :meth:`outcome` after the same all-reduce,
    seeing the same count of failed processes.
    """

    def __init__(self, device: torch.device, world: int):
        self.device = device
        self.world = world

    def _all_reduce(self, failed: int, finished: int) -> tuple[int, int]:
        flags = torch.tensor([failed, finished], dtype=torch.int64, device=self.device)
        torch.distributed.all_reduce(flags)
        failed_sum, finished_sum = flags.tolist()
        return int(failed_sum), int(finished_sum)

    def point(self) -> None:
        if self.world > 1 and self._all_reduce(0, 0)[0] > 0:
            raise _PeerOutOfMemory("another process ran out of memory in this attempt")

    def outcome(self, failed: bool) -> int:
        """Number of processes whose attempt failed (the same on every process)."""
        if self.world == 1:
            return int(failed)
        while True:
            failed_sum, finished = self._all_reduce(int(failed), 1)
            if finished == self.world:
                return failed_sum


# -- the split and its retries --------------------------------------------------------------
class MicroBatching:
    """The micro-batch split of :meth:`Accelerator.train_step <accel.Accelerator.train_step>`.

    ``micro_batch_size`` is the largest number of samples a micro-batch holds on this process
    (None: the whole batch, no split yet). It halves on out-of-memory, doubles again after
    ``grow_after`` steps without one (0: never), and is part of :meth:`state_dict`, which
    ``save_state`` writes and ``load_state`` / ``resume()`` restore: a size in samples, so it
    stays right on another number of processes.
    """

    def __init__(self, context: BackendContext):
        self.context = context
        self._backend: Backend | None = None  # the run's backend, during run()
        self.micro_batch_size: int | None = None
        self.grow_after: int = grow_after_setting()
        """Steps without out-of-memory after which a larger micro-batch is tried (0: never)."""
        self.steps_at_size = 0
        """Successful steps since the split last changed."""
        self._agreement: _Agreement | None = None
        self._weight = 1.0
        self._merge_before_last: Callable[[], bool] | None = None
        self._merged = False
        self._backwards = 0
        self.counters: list[RewindableCounter[Any]] = []
        """What counts the work of a step (the throughput monitor): a failed attempt is taken back."""

    # -- state ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, int | None]:
        """``{"micro_batch_size", "steps_at_size"}``: what a resumed run needs to keep the split."""
        return {"micro_batch_size": self.micro_batch_size, "steps_at_size": self.steps_at_size}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        size = state.get("micro_batch_size")
        self.micro_batch_size = None if size is None else int(size)
        self.steps_at_size = int(state.get("steps_at_size", 0))

    def num_micro_batches(self, length: int) -> int:
        """Micro-batches a batch of ``length`` samples is cut into with the current split."""
        if self.micro_batch_size is None or length <= self.micro_batch_size:
            return 1
        return math.ceil(length / self.micro_batch_size)

    # -- running a step ---------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether a :meth:`run` is in progress (``Accelerator.backward`` then calls :meth:`before_backward`)."""
        return self._agreement is not None

    def run(
        self,
        step: Callable[[_Batch], object],
        batch: _Batch,
        models: Sequence[torch.nn.Module],
        count_items: Callable[[_Batch], object] | None,
        reduction: str,
        num_items_in_batch: SupportsFloat | None = None,
        *,
        backend: Backend,
    ) -> torch.Tensor | None:
        """Run ``step`` over ``batch`` in as many micro-batches as fit; see ``Accelerator.train_step``.

        ``backend`` is the run's backend (held only while the step runs: this object keeps no
        reference to the Accelerator or its backend).
        """
        self._backend = backend
        try:
            if reduction not in REDUCTIONS:
                raise UsageError(
                    f"train_step(reduction={reduction!r}): use 'mean' (the step returns the mean loss "
                    "of its micro-batch) or 'sum' (losses that add up over micro-batches)"
                )
            refusal = backend.micro_batching_refusal
            if refusal:
                raise UsageError(refusal)
            length = batch_length(batch)
            if num_items_in_batch is not None and count_items is None:
                raise UsageError(
                    "train_step(num_items_in_batch=...) needs count_items=, the function counting "
                    "the items of a micro-batch"
                )
            total_items = None
            if num_items_in_batch is not None:
                # items of the whole optimizer step: undo backward's division by the accumulation steps
                total_items = float(num_items_in_batch) / self.context.gradient_accumulation_steps
            elif count_items is not None:
                total_items = self._total_items(batch, count_items)
            world = self.context.num_processes
            self._agreement = _Agreement(self.context.device, world)
            self._maybe_grow(length)
            # prepended: before the backend's own hooks and their collectives
            units = [module for model in models for module in backend.agreement_modules(model)]
            hooks = [
                unit.register_forward_pre_hook(self._forward_point, prepend=True) for unit in units
            ]
            hooks += [
                unit.register_forward_hook(self._after_forward, prepend=True) for unit in units
            ]
            try:
                while True:
                    parts = self.num_micro_batches(length)
                    marks = [(counter, counter.mark()) for counter in self.counters]
                    result, failed = self._attempt(
                        step, batch, parts, models, count_items, total_items, reduction
                    )
                    if not failed:
                        self.steps_at_size += 1
                        return result
                    for counter, mark in marks:  # the retry counts the batch again
                        counter.rewind(mark)
                    self._split_after_failure(length, parts)
            finally:
                self._agreement = None
                for hook in hooks:
                    hook.remove()
        finally:
            self._backend = None

    def _backend_of(self) -> Backend:
        assert self._backend is not None  # set by run()
        return self._backend

    def _forward_point(self, module: torch.nn.Module, args: tuple[object, ...]) -> None:
        """Forward pre-hook on the backend's agreement modules during :meth:`run`."""
        if self._agreement is not None:
            self._agreement.point()

    def _after_forward(
        self, module: torch.nn.Module, args: tuple[object, ...], output: object
    ) -> None:
        """Forward hook on the agreement modules: an agreement point at the start of their backward.

        Registered on the output before the backend's own pre-backward hooks (FSDP2's, which
        all-gather again when the unit was resharded after forward), so it runs first.
        """
        tensors = _grad_tensors(output)
        if tensors and torch.is_grad_enabled():
            torch.autograd.graph.register_multi_grad_hook(tensors, self._backward_point, mode="any")

    def _backward_point(self, grad: object) -> None:
        if self._agreement is not None:
            self._agreement.point()

    def _total_items(self, batch: _Batch, count_items: Callable[[_Batch], object]) -> float:
        """Items (tokens) of the whole batch over every data-parallel process."""
        local = torch.as_tensor(count_items(batch), dtype=torch.float64).reshape(())
        backend = self._backend_of()
        if backend.data_parallel_shard()[0] > 1:
            local = backend.reduce(local.to(self.context.device), "sum")
        total = float(local)
        if total <= 0:
            raise UsageError("train_step: count_items found no item in the batch on any process")
        return total

    def _weights(
        self,
        pieces: list[tuple[_Batch, int]],
        length: int,
        count_items: Callable[[_Batch], object] | None,
        total_items: float | None,
        reduction: str,
    ) -> tuple[list[float], list[float]]:
        """Per micro-batch: the loss weight for backward, and the weight of the returned loss."""
        if reduction == "sum":
            return [1.0] * len(pieces), [1.0] * len(pieces)
        if count_items is None:
            shares = [size / length for _, size in pieces]
            return shares, shares
        items = [float(torch.as_tensor(count_items(piece))) for piece, _ in pieces]
        local = sum(items) or 1.0
        assert total_items is not None  # run() counts them whenever count_items is given
        shards = self._backend_of().data_parallel_shard()[0]
        # the data-parallel backends average gradients over processes: undo it with ``shards``
        return [n * shards / total_items for n in items], [n / local for n in items]

    def _attempt(
        self,
        step: Callable[[_Batch], object],
        batch: _Batch,
        parts: int,
        models: Sequence[torch.nn.Module],
        count_items: Callable[[_Batch], object] | None,
        total_items: float | None,
        reduction: str,
    ) -> tuple[torch.Tensor | None, bool]:
        """One try of the whole batch in ``parts`` micro-batches: ``(combined loss, failed)``."""
        backend, agreement = self._backend_of(), self._agreement
        assert agreement is not None
        length = batch_length(batch)
        pieces = split_batch(batch, parts)
        weights, shares = self._weights(pieces, length, count_items, total_items, reduction)
        set_aside = [backend.set_aside_gradients(model) for model in models]
        syncing = self.context.sync_gradients
        # whether the backend reduces after the micro-batches, or in the last one's backward
        explicit = backend.reduces_gradients_after_no_sync
        failed, merged = False, False
        result: torch.Tensor | None = None
        try:
            for index, (piece, _) in enumerate(pieces):
                last = index == len(pieces) - 1
                in_backward_sync = last and syncing and not explicit
                self._weight = weights[index]
                self._merge_before_last = (
                    (lambda: any([s.merge() for s in set_aside])) if in_backward_sync else None
                )
                context = (
                    contextlib.nullcontext() if in_backward_sync else _no_sync(backend, models)
                )
                backwards = self._backwards
                with context:
                    value = step(piece)
                if self._backwards == backwards:
                    raise UsageError(
                        "the step given to train_step must call accelerator.backward(loss) "
                        "(not loss.backward()): its loss is weighted there"
                    )
                merged = merged or self._merged
                self._merged = False
                result = _accumulate(result, value, shares[index])
        except Exception as exc:  # noqa: BLE001 - only out-of-memory is retried, the rest re-raised
            if not (isinstance(exc, _PeerOutOfMemory) or should_reduce_batch_size(exc)):
                raise
            failed = True
            if not isinstance(exc, _PeerOutOfMemory):
                logger.info(
                    f"process {self.context.process_index}: out of memory in a micro-batch "
                    f"({type(exc).__name__})",
                    main_process_only=False,
                )
            del exc  # the traceback holds the failed attempt's tensors
        finally:
            self._merge_before_last = None
            self._merged = False
            self._weight = 1.0
        failures = agreement.outcome(failed)
        if failures == 0:
            for saved in set_aside:
                saved.merge()
            if syncing and explicit:
                backend.synchronize_gradients(list(models))
            return result, False
        result = value = None  # noqa: F841 - drop the attempt's outputs before collecting
        if merged:
            raise MicroBatchOutOfMemoryError(
                "out of memory in the synchronising backward after gradients accumulated over "
                "earlier steps were merged in: this attempt cannot be retried; start from a "
                "smaller split (accelerator.micro_batching.micro_batch_size)"
            )
        for model in models:  # a forward or backward may have stopped part-way
            backend.reset_after_failed_attempt(model)
        for saved in set_aside:
            saved.discard()
        gc.collect()
        clear_device_cache()
        return None, True

    def before_backward(self, loss: torch.Tensor) -> torch.Tensor:
        """Called by ``Accelerator.backward`` inside :meth:`run`: agree, then weight ``loss``."""
        self._backwards += 1
        if self._agreement is not None:
            self._agreement.point()
        if self._merge_before_last is not None:
            # the backend reduces in this backward: earlier steps' gradients must be in it
            self._merged = self._merge_before_last()
            self._merge_before_last = None
        return loss if self._weight == 1.0 else loss * self._weight

    # -- changing the split ----------------------------------------------------------------
    def _split_after_failure(self, length: int, parts: int) -> None:
        size = math.ceil(length / parts)
        if size <= 1:
            raise MicroBatchOutOfMemoryError(
                "out of memory with a micro-batch of 1 sample: the model does not fit this "
                "device's memory; shard it (FSDP), lower the precision or the sequence length"
            )
        parts = min(length, parts * 2)
        self.micro_batch_size = math.ceil(length / parts)
        self.steps_at_size = 0
        logger.warning(
            f"out of memory with micro-batch {size}: now {parts} micro-batches of "
            f"{self.micro_batch_size}"
        )

    def _maybe_grow(self, length: int) -> None:
        size = self.micro_batch_size
        if size is None or not self.grow_after or self.steps_at_size < self.grow_after:
            return
        if length <= size:
            return
        parts = max(1, self.num_micro_batches(length) // 2)
        self.micro_batch_size = None if parts == 1 else math.ceil(length / parts)
        self.steps_at_size = 0
        logger.warning(
            f"micro-batch {size} fitted for {self.grow_after} steps: trying "
            f"{parts} micro-batch{'es' if parts > 1 else ''} of {math.ceil(length / parts)}"
        )


def _accumulate(total: torch.Tensor | None, value: object, weight: float) -> torch.Tensor | None:
    """The weighted sum of the step's returned losses (detached); None when the step returns none."""
    if not isinstance(value, torch.Tensor):
        return total
    value = value.detach() * weight
    return value if total is None else total + value


@contextlib.contextmanager
def _no_sync(backend: Backend, models: Sequence[torch.nn.Module]) -> Generator[None, None, None]:
    with contextlib.ExitStack() as stack:
        for model in models:
            stack.enter_context(backend.no_sync(model))
        yield
