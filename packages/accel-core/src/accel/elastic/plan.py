"""Resuming a checkpoint on another number of processes: accumulation, step counters, the line.

The data position is global (:mod:`accel.elastic.position`), models and optimizers are mapped by
their backend; what is left is the arithmetic of the step. Without
``GradientAccumulationPlugin(keep_global_batch_size=True)`` the run continues with its own
accumulation steps, so the global batch changes with the number of processes. With it, the
accumulation steps are re-derived from samples so that ``per-process batch x processes x steps``
stays what it was (also when the per-process batch size changed), and the learning-rate
schedule keeps advancing as the saving run's did: the sequence of global batches, and so the
trajectory, is an uninterrupted run's (up to the order of floating-point reductions).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

from accel.elastic import position as positions
from accel.errors import ResumeError

if TYPE_CHECKING:
    from accel.checkpoint.manager import CheckpointManager
    from accel.prepared import PreparedObjects
    from accel.state import GradientState


class _PreparedScheduler(Protocol):
    num_processes: int
    split_batches: bool


class ResumingRun(Protocol):
    """What a resume reads and sets of the run (an :class:`~accel.Accelerator`)."""

    gradient_accumulation_steps: int

    @property
    def prepared(self) -> PreparedObjects: ...
    @property
    def checkpoints(self) -> CheckpointManager: ...
    @property
    def gradient_state(self) -> GradientState: ...
    @property
    def num_processes(self) -> int: ...
    @property
    def split_batches(self) -> bool: ...


@dataclass(frozen=True)
class ResumePlan:
    """What a resume on ``num_processes`` continues with, after ``saved_processes`` saved."""

    saved_processes: int
    num_processes: int
    accumulation_steps: int
    step: int
    scheduler_steps: int | None
    """Schedule steps per optimizer step to keep (None: this run's own)."""
    saved_batch_size: int | None = None
    """The saving run's per-process batch size (None: not known, taken as this run's)."""
    batch_size: int | None = None
    """This run's per-process batch size (None: no data loader, or not known)."""

    @property
    def resized(self) -> bool:
        """Whether the number of processes or the per-process batch size changed."""
        return (
            self.saved_processes != self.num_processes or self.saved_batch_size != self.batch_size
        )


def step_meta(
    num_processes: int,
    accumulation_steps: int,
    scheduler_steps: int,
    samples_per_step: int | None = None,
) -> dict[str, int | None]:
    """What :meth:`Accelerator.save_state` records for :func:`plan_resume`.

    ``samples_per_step``: the samples one step of the data loader takes across all processes
    (:func:`samples_per_step`), from which a resume derives the per-process batch size.
    """
    return {
        "num_processes": num_processes,
        "gradient_accumulation_steps": accumulation_steps,
        "scheduler_steps_per_update": scheduler_steps,
        "samples_per_step": samples_per_step,
    }


def samples_per_step(accelerator: ResumingRun) -> int | None:
    """Samples per step across all processes of the first prepared data loader (None without one)."""
    for loader in accelerator.prepared.dataloaders:
        total = getattr(loader, "total_batch_size", None)
        if total:
            return int(total)
    return None


def plan_resume(
    meta: Mapping[str, int | None],
    saved_processes: int | None,
    num_processes: int,
    accumulation_steps: int,
    split_batches: bool,
    keep_global_batch_size: bool,
    samples_per_step: int | None = None,
) -> ResumePlan:
    """How to continue the checkpoint whose ``meta`` was written by ``saved_processes``.

    ``samples_per_step``: this run's samples per data-loader step across all processes. With
    ``keep_global_batch_size`` the accumulation steps are derived from samples:
    ``N x G x B_saved / (M x B_now)`` for N processes of batch B_saved accumulating G steps,
    resumed on M of batch B_now. Raises :class:`~accel.errors.ResumeError`, naming the sizes
    that work, when that is not a whole number.
    """
    saved_n = int(meta.get("num_processes") or saved_processes or num_processes)
    saved_steps = int(meta.get("gradient_accumulation_steps") or accumulation_steps)
    step = int(meta.get("step", 0) or 0)
    saved_samples = meta.get("samples_per_step")
    saved_batch = batch = None
    if saved_samples and samples_per_step and not split_batches:
        saved_batch, batch = int(saved_samples) // saved_n, samples_per_step // num_processes
    plan = ResumePlan(saved_n, num_processes, accumulation_steps, step, None, saved_batch, batch)
    if not plan.resized or not keep_global_batch_size or split_batches:
        # split_batches: the global batch is the loader's batch size on any number of processes
        return plan
    unit_saved, unit_now = saved_batch or 1, batch or 1  # unknown: per-process batches
    total = saved_n * saved_steps * unit_saved  # one optimizer step, in samples (or batches)
    if total % (num_processes * unit_now):
        raise ResumeError(_refusal(saved_n, saved_steps, saved_batch, num_processes, batch, total))
    steps = total // (num_processes * unit_now)
    scheduler_steps = int(meta.get("scheduler_steps_per_update") or saved_n)
    return ResumePlan(
        saved_n,
        num_processes,
        steps,
        step // saved_steps * steps,
        scheduler_steps,
        saved_batch,
        batch,
    )


def _divisors(number: int) -> list[int]:
    return [d for d in range(1, number + 1) if number % d == 0]


def _refusal(
    saved_n: int, steps: int, saved_batch: int | None, n: int, batch: int | None, total: int
) -> str:
    """The one line refusing a global batch of ``total`` that ``n`` x ``batch`` cannot make up."""
    if saved_batch is None or batch is None:
        return (
            f"keep_global_batch_size: the checkpoint's global batch is {saved_n} processes x "
            f"{steps} accumulation steps = {total} per-process batches, which {n} processes "
            f"cannot split evenly; resume on {', '.join(map(str, _divisors(total)))} processes"
        )
    ways = []
    if total % batch == 0:
        ways.append(
            f"on {', '.join(map(str, _divisors(total // batch)))} processes of batch {batch}"
        )
    if total % n == 0:
        ways.append(f"on {n} processes of batch {', '.join(map(str, _divisors(total // n)))}")
    return (
        f"keep_global_batch_size: the checkpoint's global batch is {saved_n} processes x batch "
        f"{saved_batch} x {steps} accumulation steps = {total} samples, which {n} processes x "
        f"batch {batch} cannot make up in whole accumulation steps; resume "
        + (" or ".join(ways) or f"with processes x per-process batch dividing {total}")
    )


def scheduler_steps(schedulers: Iterable[object], accelerator: ResumingRun) -> int:
    """How many times a prepared scheduler advances per optimizer step (Accelerate's rule)."""
    for scheduler in schedulers:
        if hasattr(scheduler, "num_processes"):  # a prepared scheduler (AcceleratedScheduler)
            prepared = cast(_PreparedScheduler, scheduler)
            if not prepared.split_batches:
                return prepared.num_processes
    return 1 if accelerator.split_batches else accelerator.num_processes


def apply_resume(accelerator: ResumingRun, meta: Mapping[str, int | None]) -> ResumePlan:
    """Plan the resume of a loaded checkpoint and, on another size, apply and log it."""
    from accel.logging import get_logger

    found = accelerator.checkpoints.last_resume
    plan = plan_resume(
        meta,
        found.get("num_processes"),
        accelerator.num_processes,
        accelerator.gradient_accumulation_steps,
        accelerator.split_batches,
        bool(accelerator.gradient_state.plugin_kwargs.get("keep_global_batch_size")),
        samples_per_step(accelerator),
    )
    if plan.resized:
        accelerator.gradient_accumulation_steps = plan.accumulation_steps
        if plan.scheduler_steps is not None:
            for scheduler in accelerator.prepared.schedulers:
                if hasattr(scheduler, "num_processes"):
                    scheduler.num_processes = plan.scheduler_steps
        # a warning, so the one line shows under Python's default logging configuration
        get_logger("accel.accelerator").warning(resume_line(plan, found.get("positions", [])))
    return plan


def resume_line(plan: ResumePlan, loader_positions: list[positions.Position]) -> str:
    """The one line a resize logs: who wrote it, who resumes, where the data stands, the steps."""
    where = "; ".join(positions.describe(p) for p in loader_positions) or "no data loader"
    batch = ""
    if plan.saved_batch_size != plan.batch_size:
        batch = f" with per-process batch {plan.batch_size} instead of {plan.saved_batch_size}"
    return (
        f"checkpoint written by {plan.saved_processes} processes, resumed on "
        f"{plan.num_processes}{batch}: data position {where}; gradient accumulation steps now "
        f"{plan.accumulation_steps}"
    )


__all__ = [
    "ResumePlan",
    "apply_resume",
    "plan_resume",
    "resume_line",
    "samples_per_step",
    "scheduler_steps",
    "step_meta",
]
