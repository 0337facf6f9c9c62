"""Asynchronous checkpoints: ``save_state(..., async_save=True)``.

The state is *staged*: every tensor a checkpoint file would hold is copied off the
training tensors (into CPU memory, pinned when it comes from a GPU; tensors sharing a
storage, such as tied weights, still share their copy; the buffers are kept for the next
save, :class:`BufferPool`), and the small files are written into the temporary folder. The
CPU parameters and state tensors of the prepared optimizers are copied in the background
thread instead (with up to :data:`COPY_THREADS` threads), while the loop runs its next forward and backward; those optimizers'
``step`` waits for that copy (``AcceleratedOptimizer._step_guard``). The files are then
written by the same thread, after which the checkpoint is finished as a synchronous one
is: its manifest is written and it is renamed into place (so it appears under its real
name only when complete), and old checkpoints are pruned.

How the files are written is unchanged: the backends' ``save_model_state`` /
``save_optimizer_state`` and the checkpoint manager call
:func:`accel.checkpoint.layout.write_object` and
:func:`~accel.checkpoint.layout.write_model_weights` as usual; while staging,
:data:`accel.checkpoint.layout.WRITE_SINK` hands each call to :class:`Staging`, which
copies its tensors and keeps the call for the background thread.

With several processes each one stages and writes its own files; when it is done it
leaves a marker file in the temporary folder, and the process that finishes the folder
(the main process, or each process saving to a folder of its own) waits in its background
thread for the markers of every process writing there before the manifest and the rename.
No collective of the training loop's process groups runs in a background thread (a
backend handing over a write with :func:`~accel.checkpoint.layout.write_or_stage` that
needs collectives, such as FSDP's ``torch.distributed.checkpoint`` save, uses a group of
its own). A process whose write failed leaves a failure marker instead, so the folder is
abandoned (and removed), never published.

A save waits for the previous one; a failure is raised, as a
:class:`~accel.errors.CheckpointError`, by the next call that checks
(:meth:`AsyncCheckpointWriter.raise_if_failed`: ``save_state``, ``load_state``,
``backward``, ``wait_for_everyone``, ``end_training``); pending writes are waited for by
:meth:`AsyncCheckpointWriter.wait` and at interpreter exit.
"""

from __future__ import annotations

import atexit
import copy
import os
import shutil
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

import torch

from accel.checkpoint import durable, layout, manifest
from accel.config.core_options import PROCESS_SECTION
from accel.errors import CheckpointError
from accel.logging import get_logger

if TYPE_CHECKING:
    from accel.optimizer import AcceleratedOptimizer
    from accel.prepared import PreparedObjects

logger = get_logger(__name__)

DONE_MARKER = ".accel-async-done-{rank}"
"""A file a process leaves in the temporary folder once its files are written."""
FAILED_MARKER = ".accel-async-failed-{rank}"
"""A file a process leaves instead when writing failed (it holds the error)."""
FINISH_TIMEOUT = PROCESS_SECTION["async_save_timeout"].from_env()
"""Seconds the finishing process waits for the other processes' markers."""


_IMMUTABLE = (bool, int, float, complex, str, bytes, torch.dtype, torch.device)


class BufferPool:
    """CPU buffers (byte storages) kept from one save for the next.

    Copying into memory already touched is about three times faster than into new memory
    (no page faults; no ``cudaHostAlloc`` for pinned memory), and a run saves the same
    tensors every time. The pool holds as much memory as one staged state;
    :meth:`AsyncCheckpointWriter.release_buffers` frees it.
    """

    def __init__(self) -> None:
        self._free: dict[tuple[int, bool], list[torch.UntypedStorage]] = {}

    def take(self, nbytes: int, pinned: bool) -> torch.UntypedStorage:
        """A storage of ``nbytes`` bytes (a kept one when there is one)."""
        kept = self._free.get((nbytes, pinned))
        if kept:
            return kept.pop()
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned).untyped_storage()

    def give(self, storages: list[tuple[torch.UntypedStorage, bool]]) -> None:
        """Keep ``storages`` (no longer used by anything) for later saves."""
        for storage, pinned in storages:
            self._free.setdefault((storage.nbytes(), pinned), []).append(storage)

    def clear(self) -> None:
        """Drop every kept buffer."""
        self._free.clear()


COPY_THREADS = PROCESS_SECTION["async_copy_threads"].from_env(default=min(4, os.cpu_count() or 1))
"""Threads copying the deferred tensors (the copy is bound by memory bandwidth)."""


def _copy_all(
    pairs: list[tuple[torch.UntypedStorage, torch.UntypedStorage]], errors: list[BaseException]
) -> None:
    """Copy each ``(source, copy)`` pair of storages; a failure is appended to ``errors``."""
    try:
        for source, copied in pairs:
            target = torch.empty(0, dtype=torch.uint8).set_(copied)
            target.copy_(torch.empty(0, dtype=torch.uint8).set_(source))
    except BaseException as error:
        errors.append(error)


class Staging:
    """Collects the writes of one save (through :data:`~accel.checkpoint.layout.WRITE_SINK`) with copied tensors."""

    def __init__(self, pool: BufferPool | None = None, deferrable: set[int] | None = None) -> None:
        self.writes: list[tuple[Callable[..., object], tuple[object, ...]]] = []
        self.buffers: list[tuple[torch.UntypedStorage, bool]] = []
        """The storages the copies live in (given back to the pool once written)."""
        self.deferred: list[tuple[torch.UntypedStorage, torch.UntypedStorage]] = []
        """``(source, copy)`` storages whose copy :meth:`copy_deferred` makes, in the background."""
        self.copied = threading.Event()
        """Set once every deferred copy is made (the guarded optimizers may step again)."""
        self._deferrable = deferrable or set()
        self._pool = pool if pool is not None else BufferPool()
        self._memo: dict[tuple[torch.device, int], torch.UntypedStorage] = {}
        self._pin = torch.cuda.is_available()

    def __call__(self, function: Callable[..., object], args: tuple[object, ...]) -> None:
        """Keep ``function(*args)`` for later, with the tensors in ``args`` copied now.

        Shared storages are recognised within one call only: between calls a temporary
        tensor (a gathered full state dict) may be freed and its address reused.
        """
        try:
            self.writes.append((function, cast("tuple[object, ...]", self.snapshot(args))))
        finally:
            self._memo.clear()

    def snapshot(self, value: object) -> object:
        """``value`` with every tensor replaced by a CPU copy (shared storages stay shared)."""
        if isinstance(value, torch.Tensor):
            return self._copy_tensor(value)
        if isinstance(value, dict):
            return type(value)((k, self.snapshot(v)) for k, v in value.items())
        if isinstance(value, list):
            return [self.snapshot(v) for v in value]
        if isinstance(value, tuple):
            items = [self.snapshot(v) for v in value]
            return (
                cast("Callable[..., object]", type(value))(*items)
                if hasattr(value, "_fields")
                else tuple(items)
            )
        if value is None or isinstance(value, _IMMUTABLE):
            return value
        return copy.deepcopy(value)  # e.g. a NumPy RNG state: the training loop may change it

    def _copy_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.detach()
        if type(tensor) is not torch.Tensor or tensor.layout != torch.strided or tensor.is_meta:
            return tensor.to("cpu", copy=True)  # subclasses, sparse: a plain copy
        storage = tensor.untyped_storage()
        nbytes = storage.nbytes()
        key = (tensor.device, storage.data_ptr())
        copied = self._memo.get(key) if nbytes else None
        if copied is None:
            on_gpu = tensor.device.type == "cuda"
            pinned = self._pin and on_gpu
            copied = self._pool.take(nbytes, pinned)
            self.buffers.append((copied, pinned))
            if nbytes:
                if not on_gpu and storage.data_ptr() in self._deferrable:
                    self.deferred.append((storage, copied))  # copied before the next step
                else:
                    source = torch.empty(0, dtype=torch.uint8, device=tensor.device)
                    target = torch.empty(0, dtype=torch.uint8).set_(copied)
                    target.copy_(source.set_(storage), non_blocking=on_gpu)
                self._memo[key] = copied
        out = torch.empty(0, dtype=tensor.dtype)
        return out.set_(copied, tensor.storage_offset(), tensor.size(), tensor.stride())

    def __enter__(self) -> Staging:
        self._token = layout.WRITE_SINK.set(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        layout.WRITE_SINK.reset(self._token)
        if self._pin and torch.cuda.is_available():
            torch.cuda.synchronize()  # the non-blocking device-to-host copies are done
        self._memo.clear()

    def copy_deferred(self) -> None:
        """Make the deferred copies (in the calling thread and up to :data:`COPY_THREADS` - 1
        more, the storages split evenly by bytes), then set :attr:`copied`."""
        try:
            pairs, self.deferred = self.deferred, []
            lanes: list[list[tuple[torch.UntypedStorage, torch.UntypedStorage]]] = [
                [] for _ in range(max(1, min(COPY_THREADS, len(pairs))))
            ]
            loads = [0] * len(lanes)
            for pair in sorted(pairs, key=lambda p: -p[0].nbytes()):
                lane = loads.index(min(loads))
                lanes[lane].append(pair)
                loads[lane] += pair[0].nbytes()
            errors: list[BaseException] = []
            helpers = [
                threading.Thread(target=_copy_all, args=(lane, errors), daemon=True)
                for lane in lanes[1:]
            ]
            for helper in helpers:
                helper.start()
            _copy_all(lanes[0], errors)
            for helper in helpers:
                helper.join()
            if errors:
                raise errors[0]
        finally:
            self.copied.set()

    def write(self) -> None:
        """Perform the collected writes (in the calling thread), dropping each copy once written."""
        while self.writes:
            function, args = self.writes.pop(0)
            function(*args)
            del function, args


_live: weakref.WeakSet[AsyncCheckpointWriter] = weakref.WeakSet()


@atexit.register
def _wait_at_exit() -> None:
    """Finish pending checkpoint writes before the interpreter exits; report any failure."""
    for writer in list(_live):
        try:
            writer.wait()
        except CheckpointError as error:
            logger.error(str(error))
            print(f"accel: {error}", file=sys.stderr, flush=True)


class AsyncCheckpointWriter:
    """At most one checkpoint written in the background; its failure kept for the next check.

    ``finish(tmp)`` is called in the background thread once this process's files are
    written (it waits for the other processes, writes the manifest, renames and prunes).
    """

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._target: Path | None = None
        self.failed = False
        """True once a background write failed and the failure was not raised yet (cheap to test)."""
        self.pool = BufferPool()
        """The CPU buffers of the last save, reused by the next (see :meth:`release_buffers`)."""
        _live.add(self)

    @property
    def pending(self) -> bool:
        """Whether a background write is still running."""
        return self._thread is not None and self._thread.is_alive()

    def submit(
        self,
        staging: Staging,
        tmp: Path,
        rank: int,
        finish: Callable[[], None] | None,
        target: Path,
    ) -> None:
        """Write ``staging``'s files into ``tmp`` in a background thread, then mark this rank done and ``finish()``."""
        self.wait()
        self._target = target
        self._staged = staging.copied

        def run() -> None:
            try:
                staging.copy_deferred()
                staging.write()
                self.pool.give(staging.buffers)  # written: the next save copies into them
                staging.buffers = []
                durable.sync_tree(tmp)  # this process's files on disk before the manifest
                (tmp / DONE_MARKER.format(rank=rank)).touch()
                if finish is not None:
                    finish()
            except BaseException as error:  # kept for the training thread, never lost
                try:
                    if tmp.exists():
                        (tmp / FAILED_MARKER.format(rank=rank)).write_text(repr(error))
                except OSError:
                    pass
                if finish is not None:  # this process owns the folder: nothing half-written stays
                    shutil.rmtree(tmp, ignore_errors=True)
                self._error = error
                self.failed = True

        self._thread = threading.Thread(target=run, name="accel-async-checkpoint", daemon=False)
        self._thread.start()

    def wait_staged(self) -> None:
        """Block until the pending save has copied everything (what the next optimizer step waits for)."""
        staged = self._staged
        if staged is not None:
            staged.wait()

    _staged: threading.Event | None = None

    def release_buffers(self) -> None:
        """Wait for the pending write, then free the CPU memory kept for the next save's copy."""
        self.wait()
        self.pool.clear()

    def wait(self) -> None:
        """Block until the pending write (if any) is complete; raise its failure."""
        thread = self._thread
        if thread is not None:
            thread.join()
            self._thread = None
        self.raise_if_failed()

    def raise_if_failed(self) -> None:
        """Raise the failure of a finished background write, once, as a :class:`CheckpointError`."""
        if not self.failed:
            return
        error, self._error, self.failed = self._error, None, False
        raise CheckpointError(
            f"the asynchronous save of {self._target} failed: {error!r}"
        ) from error


def wait_for_markers(tmp: Path, ranks: list[int], timeout: float = FINISH_TIMEOUT) -> None:
    """Wait until every process in ``ranks`` has left its done marker in ``tmp``; remove them.

    A failure marker (or ``timeout``) raises :class:`CheckpointError`.
    """
    deadline = time.monotonic() + timeout
    waiting = set(ranks)
    delay = 0.005
    while waiting:
        for rank in sorted(waiting):
            failed = tmp / FAILED_MARKER.format(rank=rank)
            if failed.exists():
                raise CheckpointError(
                    f"process {rank} failed to write its part of {tmp}: {failed.read_text()}"
                )
            if (tmp / DONE_MARKER.format(rank=rank)).exists():
                waiting.discard(rank)
        if waiting:
            if time.monotonic() > deadline:
                raise CheckpointError(
                    f"processes {sorted(waiting)} did not finish writing {tmp} within {timeout:.0f} s"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
    for rank in ranks:
        (tmp / DONE_MARKER.format(rank=rank)).unlink(missing_ok=True)


class _AsyncCapable(Protocol):
    """A backend, as far as async saving asks it."""

    @property
    def supports_async_save(self) -> bool: ...


class _Processes(Protocol):
    @property
    def num_processes(self) -> int: ...
    @property
    def process_index(self) -> int: ...
    @property
    def is_main_process(self) -> bool: ...


class _Barrier(Protocol):
    def wait_for_everyone(self) -> None: ...


class _SavingManager(Protocol):
    """What :func:`save_async` uses of the :class:`~accel.checkpoint.manager.CheckpointManager`."""

    @property
    def state(self) -> _Processes: ...
    @property
    def prepared(self) -> PreparedObjects: ...

    @property
    def async_writer(self) -> AsyncCheckpointWriter: ...
    @property
    def backend(self) -> _Barrier: ...

    def _write(self, tmp: Path, safe_serialization: bool, meta: Mapping[str, object]) -> None: ...


def supports_async(backend: _AsyncCapable) -> bool:
    """Whether ``backend`` writes checkpoints through core's layout functions (which can be staged).

    Its declared :attr:`Backend.supports_async_save <accel.backends.Backend.supports_async_save>`
    (by default, whether it keeps core's save methods); a backend writing its own files (DCP
    for FSDP sharded states, DeepSpeed's engine) makes ``async_save`` fall back to a
    synchronous save.
    """
    return bool(backend.supports_async_save)


def _guardable(optimizers: Iterable[object]) -> tuple[list[AcceleratedOptimizer], set[int]]:
    """The prepared optimizers whose ``step`` can wait for a copy, and the storages (data
    pointers) of their parameters and state tensors: only they may be copied after
    ``save_state`` returns."""
    from accel.optimizer import AcceleratedOptimizer

    guarded = [o for o in optimizers if isinstance(o, AcceleratedOptimizer)]
    pointers: set[int] = set()
    for optimizer in guarded:
        for group in optimizer.param_groups:
            for param in group["params"]:
                pointers.add(_storage_pointer(param))
        for state in optimizer.state.values():
            for value in state.values() if isinstance(state, dict) else ():
                if isinstance(value, torch.Tensor) and value.numel() > 1:
                    pointers.add(_storage_pointer(value))
    return guarded, pointers


def _storage_pointer(tensor: torch.Tensor) -> int:
    """The data pointer of ``tensor``'s storage (a DTensor's: its local tensor's)."""
    to_local = getattr(tensor, "to_local", None)
    local = to_local() if to_local is not None else tensor
    return local.untyped_storage().data_ptr()


def _unguard_when_copied(staging: Staging, guarded: list[AcceleratedOptimizer]) -> None:
    """Remove the optimizers' step guard once the copy is made (from a small waiting thread)."""

    def unguard() -> None:
        staging.copied.wait()
        for optimizer in guarded:
            if getattr(optimizer, "_step_guard", None) == staging.copied.wait:
                optimizer._step_guard = None

    threading.Thread(target=unguard, name="accel-async-checkpoint-guard", daemon=True).start()


def save_async(
    manager: _SavingManager,
    final: Path,
    safe_serialization: bool,
    meta: Mapping[str, object],
    after: Callable[[], None] | None,
) -> Path:
    """Stage checkpoint ``final`` now and write it in the background (the manager's ``async_save`` path).

    Collective steps (agreeing on folders, creating the temporary folder) happen here, in
    the calling thread; ``after`` (pruning) runs in the background once the checkpoint is
    in place.
    """
    from accel.distributed.operations import gather_object

    state = manager.state
    writer: AsyncCheckpointWriter = manager.async_writer
    writer.wait()
    tmp = layout.temporary_dir(final)
    mine = os.fspath(final.resolve())
    folders = gather_object([mine]) if state.num_processes > 1 else [mine]
    owner = state.is_main_process or mine != folders[0]
    if owner:
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
    manager.backend.wait_for_everyone()
    guarded, deferrable = _guardable(manager.prepared.optimizers)
    try:
        with Staging(writer.pool, deferrable) as staging:
            manager._write(tmp, safe_serialization, meta)
    except BaseException:
        if owner:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    if staging.deferred:
        # The parameters and optimizer state are copied in the background, while the loop
        # runs its next forward and backward (which do not change them); the prepared
        # optimizers' next step waits for the copy.
        for optimizer in guarded:
            optimizer._step_guard = staging.copied.wait
        _unguard_when_copied(staging, guarded)
    finish = None
    if owner:
        ranks = [rank for rank, folder in enumerate(folders) if folder == mine]
        world = state.num_processes

        def finish() -> None:
            wait_for_markers(tmp, ranks)
            manifest.write_manifest(tmp, world)
            layout.replace_dir(tmp, final)
            if after is not None:
                after()
            logger.info(f"saved state to {final} (asynchronously)")

    writer.submit(staging, tmp, state.process_index, finish, final)
    return final
