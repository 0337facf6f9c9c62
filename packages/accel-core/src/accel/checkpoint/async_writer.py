"""Asynchronous checkpoints: ``save_state(..., async_save=True)``.

The training loop is blocked only while the state is *staged*: every tensor a checkpoint
file would hold is copied off the training tensors (into CPU memory, pinned when it comes
from a GPU; tensors sharing a storage, such as tied weights, still share their copy), and
the small files (``meta.json``) are written into the temporary folder. The large files are
then written by a background thread, after which the checkpoint is finished as a
synchronous one is: its manifest is written and it is renamed into place (so it appears
under its real name only when complete), and old checkpoints are pruned.

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
No collective runs in a background thread. A process whose write failed leaves a failure
marker instead, so the folder is abandoned (and removed), never published.

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from accel.checkpoint import layout, manifest
from accel.errors import CheckpointError
from accel.logging import get_logger

logger = get_logger(__name__)

DONE_MARKER = ".accel-async-done-{rank}"
"""A file a process leaves in the temporary folder once its files are written."""
FAILED_MARKER = ".accel-async-failed-{rank}"
"""A file a process leaves instead when writing failed (it holds the error)."""
FINISH_TIMEOUT = float(os.environ.get("ACCEL_ASYNC_SAVE_TIMEOUT", 3600))
"""Seconds the finishing process waits for the other processes' markers."""


def _snapshot(value: Any, memo: dict[tuple[Any, int], torch.UntypedStorage], pin: bool) -> Any:
    """``value`` with every tensor replaced by a CPU copy (shared storages stay shared)."""
    if isinstance(value, torch.Tensor):
        return _copy_tensor(value, memo, pin)
    if isinstance(value, dict):
        return type(value)((k, _snapshot(v, memo, pin)) for k, v in value.items())
    if isinstance(value, list):
        return [_snapshot(v, memo, pin) for v in value]
    if isinstance(value, tuple):
        items = [_snapshot(v, memo, pin) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if value is None or isinstance(value, _IMMUTABLE):
        return value
    return copy.deepcopy(value)  # e.g. a NumPy RNG state: the training loop may change it


_IMMUTABLE = (bool, int, float, complex, str, bytes, torch.dtype, torch.device)


def _copy_tensor(
    tensor: torch.Tensor, memo: dict[tuple[Any, int], torch.UntypedStorage], pin: bool
) -> torch.Tensor:
    tensor = tensor.detach()
    if type(tensor) is not torch.Tensor or tensor.layout != torch.strided or tensor.is_meta:
        return tensor.to("cpu", copy=True)  # subclasses, sparse: a plain copy
    storage = tensor.untyped_storage()
    nbytes = storage.nbytes()
    key = (tensor.device, storage.data_ptr())
    copied = memo.get(key) if nbytes else None
    if copied is None:
        source = torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(storage)
        target = torch.empty(
            nbytes, dtype=torch.uint8, pin_memory=pin and tensor.device.type == "cuda"
        )
        target.copy_(source, non_blocking=tensor.device.type == "cuda")
        copied = target.untyped_storage()
        if nbytes:
            memo[key] = copied
    out = torch.empty(0, dtype=tensor.dtype)
    return out.set_(copied, tensor.storage_offset(), tensor.size(), tensor.stride())


class Staging:
    """Collects the writes of one save (through :data:`~accel.checkpoint.layout.WRITE_SINK`) with copied tensors."""

    def __init__(self) -> None:
        self.writes: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self._memo: dict[tuple[Any, int], torch.UntypedStorage] = {}
        self._pin = torch.cuda.is_available()

    def __call__(self, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """Keep ``function(*args)`` for later, with the tensors in ``args`` copied now."""
        self.writes.append((function, _snapshot(args, self._memo, self._pin)))

    def __enter__(self) -> Staging:
        self._token = layout.WRITE_SINK.set(self)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        layout.WRITE_SINK.reset(self._token)
        if self._pin and torch.cuda.is_available():
            torch.cuda.synchronize()  # the non-blocking device-to-host copies are done
        self._memo.clear()

    def write(self) -> None:
        """Perform the collected writes (in the calling thread), dropping each copy once written."""
        while self.writes:
            function, args = self.writes.pop(0)
            function(*args)


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

        def run() -> None:
            try:
                staging.write()
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


def supports_async(backend: Any) -> bool:
    """Whether ``backend`` writes checkpoints through core's layout functions (which can be staged).

    A backend that writes its own files (DCP for FSDP sharded states, DeepSpeed's engine)
    opts in with ``supports_async_save = True`` once its writes go through the layout
    functions; otherwise ``async_save`` falls back to a synchronous save.
    """
    from accel.backends.base import Backend

    declared = getattr(backend, "supports_async_save", None)
    if declared is not None:
        return bool(declared)
    kind = type(backend)
    return (
        kind.save_model_state is Backend.save_model_state
        and kind.save_optimizer_state is Backend.save_optimizer_state
    )


def save_async(
    manager: Any,
    final: Path,
    safe_serialization: bool,
    meta: dict,
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
    try:
        with Staging() as staging:
            manager._write(tmp, safe_serialization, meta)
    except BaseException:
        if owner:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
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
