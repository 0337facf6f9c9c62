"""AcceleratedOptimizer: steps only on synchronising steps, through the precision's scaler."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from accel.faults import preemption
from accel.precision.base import Precision
from accel.state import GradientState


class AcceleratedOptimizer(torch.optim.Optimizer):
    """Wraps an optimizer so ``step``/``zero_grad`` respect gradient accumulation and mixed precision.

    During accumulation steps (``sync_gradients`` False) both are no-ops, so the
    training loop is written once, as for a single step.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        precision: Precision | None = None,
        device_placement: bool = True,
    ):
        self.optimizer = optimizer
        self.precision = precision  # a property: also decides which step function to call
        self.gradient_state = GradientState()

    _step_guard: Callable[[], object] | None = None
    """Set while ``save_state(..., async_save=True)`` copies this optimizer's tensors: step waits."""

    @property
    def precision(self) -> Precision | None:
        """The :class:`~accel.precision.Precision` whose ``optimizer_step`` steps (None: step directly)."""
        return self._precision

    @precision.setter
    def precision(self, value: Precision | None) -> None:
        self._precision = value
        self._is_overflow = False  # only a precision's optimizer_step skips steps
        # Decided once: a precision that keeps the base ``optimizer_step`` (no scaler) needs no
        # indirection, so the wrapped optimizer's own ``step`` is called directly.
        self._precision_step = (
            None
            if value is None or type(value).optimizer_step is Precision.optimizer_step
            else value.optimizer_step
        )

    # torch.optim.Optimizer protocol, delegated -------------------------
    @property
    def state(self):  # type: ignore[override]
        """The wrapped optimizer's per-parameter state."""
        return self.optimizer.state

    @state.setter
    def state(self, value):
        self.optimizer.state = value

    @property
    def param_groups(self):  # type: ignore[override]
        """The wrapped optimizer's parameter groups."""
        return self.optimizer.param_groups

    @param_groups.setter
    def param_groups(self, value):
        self.optimizer.param_groups = value

    @property
    def defaults(self):  # type: ignore[override]
        """The wrapped optimizer's defaults."""
        return self.optimizer.defaults

    @defaults.setter
    def defaults(self, value):
        self.optimizer.defaults = value

    def add_param_group(self, param_group: dict) -> None:
        """Add a parameter group to the wrapped optimizer."""
        self.optimizer.add_param_group(param_group)

    def load_state_dict(self, state_dict: dict) -> None:
        """Load the wrapped optimizer's state."""
        self.optimizer.load_state_dict(state_dict)

    def state_dict(self) -> dict:
        """The wrapped optimizer's state."""
        return self.optimizer.state_dict()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero gradients, on synchronising steps only."""
        if self.gradient_state.sync_gradients:
            self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure: Any = None) -> Any:  # Any: None even with a closure when fp16 skips
        """Step on synchronising steps; with fp16, skip (and record it) when gradients overflowed."""
        if not self.gradient_state.sync_gradients:
            return None
        guard = self._step_guard
        if guard is not None:  # an asynchronous save is still copying the weights: wait for it
            guard()
        preemption.step_done()  # the next batch is a point where ranks may agree to stop
        precision_step = self._precision_step
        if precision_step is not None:
            self._is_overflow = not precision_step(self.optimizer, closure)
            return None
        return self.optimizer.step(closure) if closure is not None else self.optimizer.step()

    def train(self) -> None:
        """Switch schedule-free optimizers to train mode."""
        train = getattr(self.optimizer, "train", None)
        if train is not None:
            train()

    def eval(self) -> None:
        """Switch schedule-free optimizers to eval mode."""
        eval_mode = getattr(self.optimizer, "eval", None)
        if eval_mode is not None:
            eval_mode()

    @property
    def step_was_skipped(self) -> bool:
        """Whether the last step was skipped because of fp16 overflow."""
        return self._is_overflow

    def __getstate__(self) -> dict:
        return self.__dict__.copy()

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"AcceleratedOptimizer({self.optimizer!r})"


def fused_backward(
    optimizers: Sequence[object], loss: torch.Tensor, learning_rate: float | None
) -> bool:
    """Run ``fused_backward(loss, learning_rate)`` of the LOMO / AdaLomo optimizers among ``optimizers``.

    These optimizers (``lomo-optim``) update the weights during the backward pass.
    Returns whether one did (then no other backward is needed); False when
    ``learning_rate`` is None or none of the prepared optimizers is fused.
    """
    fused = [
        method
        for opt in optimizers
        if callable(method := getattr(getattr(opt, "optimizer", opt), "fused_backward", None))
    ]
    if learning_rate is None or not fused:
        return False
    for fused_backward in fused:
        fused_backward(loss, learning_rate)
    return True
