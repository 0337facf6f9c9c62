"""Resuming a checkpoint on another number of processes: accumulation, step counters, the line.

The data position is global (:mod:`accel.data.position`), models and optimizers are mapped by
their backend; what is left is the arithmetic of the step. Without
``GradientAccumulationPlugin(keep_global_batch_size=True)`` the run continues with its own
accumulation steps, so the global batch changes with the number of processes. With it, the
accumulation steps are re-derived so that ``per-process batch x processes x steps`` stays what it
was, and the learning-rate schedule keeps advancing as the saving run's did: the sequence of
global batches, and so the trajectory, is an uninterrupted run's (up to the order of
floating-point reductions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accel.data import position as positions
from accel.errors import ResumeError


@dataclass(frozen=True)
class ResumePlan:
    """What a resume on ``num_processes`` continues with, after ``saved_processes`` saved."""

    saved_processes: int
    num_processes: int
    accumulation_steps: int
    step: int
    scheduler_steps: int | None
    """Schedule steps per optimizer step to keep (None: this run's own)."""

    @property
    def resized(self) -> bool:
        """Whether the number of processes changed."""
        return self.saved_processes != self.num_processes


def step_meta(num_processes: int, accumulation_steps: int, scheduler_steps: int) -> dict[str, int]:
    """What :meth:`Accelerator.save_state` records for :func:`plan_resume`."""
    return {
        "num_processes": num_processes,
        "gradient_accumulation_steps": accumulation_steps,
        "scheduler_steps_per_update": scheduler_steps,
    }


def plan_resume(
    meta: dict[str, Any],
    saved_processes: int | None,
    num_processes: int,
    accumulation_steps: int,
    split_batches: bool,
    keep_global_batch_size: bool,
) -> ResumePlan:
    """How to continue the checkpoint whose ``meta`` was written by ``saved_processes``.

    Raises :class:`~accel.errors.ResumeError` when the global batch is to be kept and no
    whole number of accumulation steps does it on ``num_processes``.
    """
    saved_n = int(meta.get("num_processes") or saved_processes or num_processes)
    saved_steps = int(meta.get("gradient_accumulation_steps") or accumulation_steps)
    step = int(meta.get("step", 0) or 0)
    if saved_n == num_processes or not keep_global_batch_size or split_batches:
        # split_batches: the global batch is the loader's batch size on any number of processes
        return ResumePlan(saved_n, num_processes, accumulation_steps, step, None)
    per_update = saved_n * saved_steps  # per-process batches in one optimizer step
    if per_update % num_processes:
        sizes = [m for m in range(1, per_update + 1) if per_update % m == 0]
        raise ResumeError(
            f"keep_global_batch_size: the checkpoint's global batch is {saved_n} processes x "
            f"{saved_steps} accumulation steps = {per_update} per-process batches, which "
            f"{num_processes} processes cannot split evenly; resume on "
            f"{', '.join(map(str, sizes))} processes"
        )
    steps = per_update // num_processes
    scheduler_steps = int(meta.get("scheduler_steps_per_update") or saved_n)
    return ResumePlan(saved_n, num_processes, steps, step // saved_steps * steps, scheduler_steps)


def scheduler_steps(schedulers: list[Any], accelerator: Any) -> int:
    """How many times a prepared scheduler advances per optimizer step (Accelerate's rule)."""
    for scheduler in schedulers:
        if hasattr(scheduler, "num_processes") and not scheduler.split_batches:
            return scheduler.num_processes
    return 1 if accelerator.split_batches else accelerator.num_processes


def apply_resume(accelerator: Any, meta: dict[str, Any]) -> ResumePlan:
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


def resume_line(plan: ResumePlan, loader_positions: list[dict[str, Any]]) -> str:
    """The one line a resize logs: who wrote it, who resumes, where the data stands, the steps."""
    where = "; ".join(positions.describe(p) for p in loader_positions) or "no data loader"
    return (
        f"checkpoint written by {plan.saved_processes} processes, resumed on "
        f"{plan.num_processes}: data position {where}; gradient accumulation steps now "
        f"{plan.accumulation_steps}"
    )


__all__ = [
    "ResumePlan",
    "apply_resume",
    "plan_resume",
    "resume_line",
    "scheduler_steps",
    "step_meta",
]
