"""``RunView``: what the checkpoint hooks see of a run, instead of the Accelerator.

The hooks ``accel_checkpoint_saved(run, path)`` and ``accel_before_resume(run,
checkpoint_root)`` (:mod:`accel.hookspecs`) receive a :class:`RunView`: the process facts,
the step, the checkpoint path and a barrier. A plugin reacting to checkpoints needs no
more, and cannot reach (or keep) the Accelerator through it: the barrier is built from the
run's checkpoint writer and backend, not a bound method of the Accelerator. ``accel_profile``
receives one too (its ``checkpoint_path`` empty).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from accel.checkpoint.manager import CheckpointManager


class _Waits(Protocol):
    def wait(self) -> None: ...


class _Barrier(Protocol):
    def wait_for_everyone(self) -> None: ...


class Viewable(Protocol):
    """What :meth:`RunView.of` reads (an :class:`~accel.Accelerator`)."""

    @property
    def process_index(self) -> int: ...
    @property
    def num_processes(self) -> int: ...
    @property
    def local_process_index(self) -> int: ...
    @property
    def is_main_process(self) -> bool: ...
    @property
    def is_local_main_process(self) -> bool: ...
    @property
    def step(self) -> int: ...
    @property
    def checkpoints(self) -> CheckpointManager: ...
    @property
    def backend(self) -> _Barrier: ...


@dataclass(frozen=True)
class RunView:
    """A frozen snapshot of one process of the run, taken when a checkpoint hook is called.

    Attribute names are the Accelerator's, so a helper written for either (accel-ray's
    ``report_checkpoint(accelerator_or_run, path)``) takes both.
    """

    process_index: int
    """Global rank of this process."""
    num_processes: int
    """Total number of processes."""
    local_process_index: int
    """Rank of this process on its machine."""
    is_main_process: bool
    """True on global rank 0."""
    is_local_main_process: bool
    """True on local rank 0 of each machine."""
    step: int
    """The Accelerator's ``step`` (incremented by the user's loop, saved in checkpoints)."""
    checkpoint_path: str
    """The checkpoint directory the hook is about: the one just saved
    (``accel_checkpoint_saved``) or ``project_dir/checkpoints``, where ``resume`` looks
    (``accel_before_resume``); empty for ``accel_profile``."""
    wait_for_everyone: Callable[[], None] = field(repr=False, compare=False)
    """Barrier across processes; also waits for this process's asynchronous checkpoint writes,
    so a checkpoint saved with ``async_save=True`` is complete after it."""

    @classmethod
    def of(cls, accelerator: Viewable, checkpoint_path: str = "") -> RunView:
        """The view of ``accelerator`` for ``checkpoint_path``: its facts now, and a barrier that
        keeps its checkpoint writer and backend, never the Accelerator itself."""
        return cls(
            process_index=accelerator.process_index,
            num_processes=accelerator.num_processes,
            local_process_index=accelerator.local_process_index,
            is_main_process=accelerator.is_main_process,
            is_local_main_process=accelerator.is_local_main_process,
            step=accelerator.step,
            checkpoint_path=str(checkpoint_path),
            wait_for_everyone=_barrier(accelerator.checkpoints.async_writer, accelerator.backend),
        )


def _barrier(writer: _Waits, backend: _Barrier) -> Callable[[], None]:
    """What ``Accelerator.wait_for_everyone`` does: this process's pending checkpoint writes,
    then the backend's barrier."""

    def wait_for_everyone() -> None:
        writer.wait()
        backend.wait_for_everyone()

    return wait_for_everyone


__all__ = ["RunView"]
