"""Placeholders for an optimizer and a scheduler that the DeepSpeed config itself defines. Torch-free."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from torch.optim.optimizer import ParamsT


class DummyOptim:
    """Stands for the optimizer of the DeepSpeed config's ``optimizer`` section.

    Pass it to ``accelerator.prepare`` instead of a torch optimizer; its ``lr`` and
    ``weight_decay`` fill that section's ``"auto"`` values. ``prepare`` returns the
    optimizer DeepSpeed built.
    """

    def __init__(
        self, params: ParamsT, lr: float = 0.001, weight_decay: float = 0, **kwargs: object
    ):
        self.params = params
        self.lr = lr
        self.weight_decay = weight_decay
        self.kwargs = kwargs


class DummyScheduler:
    """Stands for the scheduler of the DeepSpeed config's ``scheduler`` section.

    ``total_num_steps`` and ``warmup_num_steps`` fill that section's ``"auto"``
    values. With ``lr_scheduler_callable`` and no ``scheduler`` section, the
    callable is called with the DeepSpeed optimizer to build the scheduler.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer | DummyOptim,
        total_num_steps: int | None = None,
        warmup_num_steps: int = 0,
        lr_scheduler_callable: Callable[[torch.optim.Optimizer], object] | None = None,
        **kwargs: object,
    ):
        self.optimizer = optimizer
        self.total_num_steps = total_num_steps
        self.warmup_num_steps = warmup_num_steps
        self.lr_scheduler_callable = lr_scheduler_callable
        self.kwargs = kwargs
