"""What ``prepare`` returns around a DeepSpeed engine: its optimizer and scheduler wrappers.

The engine itself is returned as the model. It runs backward, the optimizer step,
gradient clipping, zeroing and the scheduler step (in
:meth:`DeepSpeedEngineWrapper.backward`), so the wrappers' ``step`` and
``zero_grad`` do nothing: the training loop stays the one written for one process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import torch
from accel.faults import preemption
from accel.optimizer import AcceleratedOptimizer
from accel.scheduler import AcceleratedScheduler

if TYPE_CHECKING:
    from deepspeed.runtime.base_optimizer import DeepSpeedOptimizer
    from deepspeed.runtime.engine import DeepSpeedEngine


class DeepSpeedEngineWrapper:
    """Runs one backward pass through a DeepSpeed engine, stepping at accumulation boundaries."""

    def __init__(self, engine: DeepSpeedEngine):
        self.engine = engine

    def backward(self, loss: torch.Tensor, sync_gradients: bool = True, **kwargs: object) -> None:
        """``engine.backward(loss, **kwargs)``, then the engine's step when ``sync_gradients``.

        ``kwargs`` go to ``engine.backward`` (``scale_wrt_gas``: whether the engine divides
        the loss by its accumulation steps, default True; ``retain_graph``). The engine's
        accumulation boundary is set from ``sync_gradients``, which
        ``accelerator.accumulate()`` (or the Trainer) decides, so DeepSpeed reduces
        gradients and steps on exactly the micro-batches where accel does.
        """
        self.engine.set_gradient_accumulation_boundary(is_boundary=sync_gradients)
        self.engine.backward(loss, **kwargs)
        if sync_gradients:
            # clipping, optimizer step, overflow check, zero_grad and scheduler step
            self.engine.step()

    def get_global_grad_norm(self) -> torch.Tensor | None:
        """The norm of all gradients at the last step (before clipping), or None."""
        norm = self.engine.get_global_grad_norm()
        if norm is None:
            return None
        return norm.detach().clone() if isinstance(norm, torch.Tensor) else torch.tensor(norm)


class DeepSpeedOptimizerWrapper(AcceleratedOptimizer):
    """The optimizer DeepSpeed steps; ``step`` and ``zero_grad`` are done by ``accelerator.backward``."""

    def __init__(self, optimizer: torch.optim.Optimizer | DeepSpeedOptimizer):
        # a ZeRO optimizer is no torch Optimizer subclass, but has the interface the wrapper reads
        super().__init__(cast("torch.optim.Optimizer", optimizer), precision=None)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Nothing: the engine zeroes gradients after its step."""

    def step(self, closure: Any = None) -> Any:  # as AcceleratedOptimizer.step (torch overloads it)
        """Nothing to compute (the engine stepped in ``accelerator.backward``); marks the step.

        On a synchronising step the next batch becomes a point where the processes may
        agree to stop for a preemption, as after any prepared optimizer's step.
        """
        if self.gradient_state.sync_gradients:
            preemption.step_done()

    @property
    def step_was_skipped(self) -> bool:
        """Whether the last step was skipped because fp16 gradients overflowed."""
        return bool(getattr(self.optimizer, "overflow", False))


class DeepSpeedSchedulerWrapper(AcceleratedScheduler):
    """A scheduler the engine steps once per optimizer step; ``step`` here does nothing."""

    def __init__(self, scheduler: object, optimizers: list[DeepSpeedOptimizerWrapper | None]):
        super().__init__(scheduler, optimizers)

    def step(self, *args: object, **kwargs: object) -> None:
        """Nothing: the engine stepped the scheduler with the optimizer."""
