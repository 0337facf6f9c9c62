"""AcceleratedScheduler: steps in step with the optimizer under accumulation and multi-process."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from accel.state import GradientState

if TYPE_CHECKING:
    import torch


class AcceleratedScheduler:
    """Wraps a learning-rate scheduler.

    It steps only when its optimizers really stepped (not on accumulation steps,
    not after an fp16 overflow). When ``split_batches`` is False each process sees
    a full batch, so the schedule advances ``num_processes`` times per step, as in
    Accelerate; with ``adjust_scheduler`` accumulation steps are counted too.
    ``optimizers`` may hold None where a backend wraps a scheduler before its optimizer
    exists (DeepSpeed, Megatron-LM): such an entry never skips a step.
    """

    def __init__(
        self,
        scheduler: Any,
        optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer | None],
        step_with_optimizer: bool = True,
        split_batches: bool = False,
        num_processes: int = 1,
    ):
        self.scheduler = scheduler
        self.optimizers = optimizers if isinstance(optimizers, (list, tuple)) else [optimizers]
        self.split_batches = split_batches
        self.step_with_optimizer = step_with_optimizer
        self.num_processes = num_processes
        self.gradient_state = GradientState()

    def step(self, *args: object, **kwargs: object) -> None:
        """Advance the schedule if the optimizer stepped."""
        if not self.step_with_optimizer:
            self.scheduler.step(*args, **kwargs)
            return
        if not self.gradient_state.sync_gradients:
            if self.gradient_state.adjust_scheduler:
                self.scheduler._step_count += 1
            return
        for opt in self.optimizers:
            if getattr(opt, "step_was_skipped", False):
                return
        scheduler = self.scheduler
        if self.split_batches or self.num_processes == 1:
            total = getattr(scheduler, "total_steps", None)
            if total is None or scheduler.last_epoch < total:
                scheduler.step(*args, **kwargs)
            return
        for _ in range(self.num_processes):
            # A finite schedule (OneCycleLR) must not be stepped past its end.
            total = getattr(scheduler, "total_steps", None)
            if total is not None and scheduler.last_epoch >= total:
                break
            scheduler.step(*args, **kwargs)

    def get_last_lr(self) -> list[float]:
        """The last learning rates."""
        return self.scheduler.get_last_lr()

    def state_dict(self) -> dict:
        """The wrapped scheduler's state."""
        return self.scheduler.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        """Load the wrapped scheduler's state."""
        self.scheduler.load_state_dict(state_dict)

    def get_lr(self) -> list[float]:
        """The wrapped scheduler's ``get_lr``."""
        return self.scheduler.get_lr()

    def print_lr(self, *args: object, **kwargs: object) -> object:
        """The wrapped scheduler's ``print_lr``."""
        return self.scheduler.print_lr(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name == "scheduler":
            raise AttributeError(name)
        return getattr(self.scheduler, name)
