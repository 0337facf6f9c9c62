"""Preemption: on SIGTERM every rank finishes its step, saves a checkpoint and exits 75.

Opt in with ``accel launch --preemption`` (sets ``ACCEL_PREEMPTION=true``), with the
environment variable itself, or in code with
``Accelerator(kwargs_handlers=[PreemptionKwargs()])``. Then:

* the first SIGTERM on any rank (the launcher forwards its own to every worker) only sets
  a flag; the step in progress finishes;
* after each optimizer step that really stepped (gradient accumulation: only on
  synchronising steps), at the moment the loop asks a prepared data loader for its next
  batch, the ranks agree on the flag with a one-element all-reduce (max); no collective
  runs with a single process;
* when it is set anywhere, every rank calls ``accelerator.save_state()`` at that same step
  and exits with :data:`PREEMPTED_EXIT_CODE` (75, ``EX_TEMPFAIL``: run it again);
* a second SIGTERM, or the grace period running out before the checkpoint is written,
  exits at once with 143 (128 + SIGTERM); an interrupted save never looks complete.

A loop without a prepared data loader calls :func:`preemption_point` after each step.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accel.config.core_options import PROCESS_SECTION
from accel.kwargs import KwargsHandler

from . import flight

if TYPE_CHECKING:
    from types import FrameType

    import torch

    from accel.kwargs import ProjectConfiguration

PREEMPTED_EXIT_CODE = 75
"""Exit code of every rank (and of ``accel launch``) after a preemption checkpoint was written."""
KILLED_EXIT_CODE = 128 + int(signal.SIGTERM)
"""Exit code (143) after a second SIGTERM or an expired grace period: no new checkpoint."""
DEFAULT_GRACE_PERIOD = 25.0
"""Seconds between the first SIGTERM and a forced exit (under SLURM's default KillWait of 30 s)."""
DEFAULT_FOLDER = "preempted"
"""Checkpoint folder under ``project_dir`` (else the working directory) without automatic naming."""


@dataclass
class PreemptionKwargs(KwargsHandler):
    """Turn preemption handling on for an :class:`~accel.Accelerator` (``kwargs_handlers=[...]``).

    ``grace_period`` defaults to ``$ACCEL_PREEMPTION_GRACE_PERIOD`` or 25 s;
    ``checkpoint_dir`` defaults to automatic checkpoint naming when the project
    configuration has it, else ``<project_dir>/preempted``.
    """

    enabled: bool = True
    grace_period: float | None = None
    checkpoint_dir: str | None = None
    exit_code: int = PREEMPTED_EXIT_CODE


class PreemptionHandler:
    """Catches SIGTERM, decides with the other ranks when to stop, saves and exits."""

    def __init__(
        self,
        save_state: Callable[[str | None], object],
        options: PreemptionKwargs,
        *,
        process_index: int = 0,
        device: torch.device | None = None,
        project_configuration: ProjectConfiguration | None = None,
    ):
        self.save_state = save_state
        """Writes the checkpoint (``Accelerator.save_state``): a folder or None, returns its path."""
        self.options = options
        self.process_index = process_index
        self.device = device
        """Where the agreement's flag lives (the process group's device)."""
        self.project_configuration = project_configuration
        grace = options.grace_period
        if grace is None:
            grace = PROCESS_SECTION["preemption_grace_period"].from_env(
                default=DEFAULT_GRACE_PERIOD
            )
        self.grace_period = float(grace)
        self.requested: float | None = None
        """``time.monotonic()`` of the first SIGTERM on this rank, None before."""
        self.signum = int(signal.SIGTERM)
        self.pending = False
        """An optimizer step happened since the last agreement."""
        self.checks = 0
        """How many agreements ran (one per optimizer step)."""
        self._timer: threading.Timer | None = None
        self._flag: torch.Tensor | None = None
        self._previous = signal.signal(signal.SIGTERM, self._on_signal)

    # -- signals ------------------------------------------------------------
    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self.requested is not None:
            self._exit_now(signum, "a second SIGTERM")
        self.requested = time.monotonic()
        self.signum = signum
        sys.stderr.write(
            f"accel: rank {self.process_index} got {signal.Signals(signum).name}: finishing the current "
            f"step, then saving a checkpoint (exits at once on a second signal or after "
            f"{self.grace_period:g} s)\n"
        )
        sys.stderr.flush()
        self._timer = threading.Timer(
            self.grace_period,
            self._exit_now,
            (signum, f"the grace period of {self.grace_period:g} s ran out"),
        )
        self._timer.daemon = True
        self._timer.start()

    def _exit_now(self, signum: int, why: str) -> None:
        code = 128 + int(signum)
        try:
            sys.stderr.write(
                f"accel: rank {self.process_index}: {why} before the preemption checkpoint was "
                f"written: exiting now with {code}\n"
            )
            sys.stderr.flush()
        except Exception:
            pass
        flight.dump_stack()
        flight.finish(code, why)
        os._exit(code)

    # -- agreement ----------------------------------------------------------
    def check(self) -> bool:
        """Agree with every rank on whether one of them was signalled; if so, save and exit."""
        self.pending = False
        self.checks += 1
        stop = self.requested is not None
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            import torch

            if self._flag is None:
                self._flag = torch.zeros(1, dtype=torch.int32, device=self.device)
            self._flag.fill_(1 if stop else 0)
            flight.record("preemption_check")
            dist.all_reduce(self._flag, op=dist.ReduceOp.MAX)
            stop = bool(self._flag.item())
        if stop:
            self._save_and_exit()
        return stop

    def _target(self) -> str | None:
        if self.options.checkpoint_dir:
            return self.options.checkpoint_dir
        project = self.project_configuration
        if project is not None and project.automatic_checkpoint_naming:
            return None
        project_dir = getattr(project, "project_dir", None)
        return os.path.join(project_dir or os.getcwd(), DEFAULT_FOLDER)

    def _save_and_exit(self) -> None:
        path = self.save_state(self._target())
        if self.process_index == 0:
            sys.stderr.write(
                f"accel: preempted: every rank stopped after optimizer step {self.checks} of this run; "
                f"checkpoint saved to {path}; exiting with {self.options.exit_code}\n"
            )
            sys.stderr.flush()
        if self._timer is not None:
            self._timer.cancel()
        raise SystemExit(self.options.exit_code)

    def close(self) -> None:
        """Stop handling SIGTERM (the previous handler comes back)."""
        global _active
        if self._timer is not None:
            self._timer.cancel()
        try:
            signal.signal(signal.SIGTERM, self._previous)
        except (ValueError, TypeError):
            pass
        if _active is self:
            _active = None


_active: PreemptionHandler | None = None


def install(
    save_state: Callable[[str | None], object],
    options: PreemptionKwargs | None = None,
    *,
    process_index: int = 0,
    device: torch.device | None = None,
    project_configuration: ProjectConfiguration | None = None,
) -> PreemptionHandler | None:
    """Turn preemption handling on if asked (``options`` or ``ACCEL_PREEMPTION``).

    ``save_state`` writes the checkpoint; ``process_index``, ``device`` and
    ``project_configuration`` are :class:`PreemptionHandler`'s. Returns the handler, or None
    when off. Must run in the main thread (signal handlers).
    """
    global _active
    if options is None:
        if not PROCESS_SECTION["preemption"].from_env():
            return None
        options = PreemptionKwargs()
    if not options.enabled:
        return None
    if _active is not None:
        _active.close()
    _active = PreemptionHandler(
        save_state,
        options,
        process_index=process_index,
        device=device,
        project_configuration=project_configuration,
    )
    return _active


def active() -> PreemptionHandler | None:
    """The handler of this process, if preemption handling is on."""
    return _active


def step_done() -> None:
    """Called by the prepared optimizer after a real step: the next :func:`preemption_point` agrees."""
    if _active is not None:
        _active.pending = True


def preemption_point() -> None:
    """Where ranks agree to stop: the prepared data loaders do the same before each batch.

    Does nothing unless preemption handling is on and an optimizer step happened since
    the last call. Call it yourself after each step in a loop without a prepared loader.
    (A prepared loader looks the handler up when an epoch starts, so with preemption off
    its batches cost no call; a handler installed mid-epoch is seen from the next epoch.)
    """
    if _active is not None and _active.pending:
        _active.check()


__all__ = [
    "DEFAULT_FOLDER",
    "DEFAULT_GRACE_PERIOD",
    "KILLED_EXIT_CODE",
    "PREEMPTED_EXIT_CODE",
    "PreemptionHandler",
    "PreemptionKwargs",
    "active",
    "install",
    "preemption_point",
    "step_done",
]
