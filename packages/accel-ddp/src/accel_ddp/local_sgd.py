"""LocalSGD: train without gradient synchronisation and average parameters every ``local_sgd_steps``."""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import Protocol

import torch
import torch.distributed as dist


class Trainer(Protocol):
    """What :class:`LocalSGD` uses of the Accelerator it is given."""

    @property
    def num_processes(self) -> int: ...

    def no_sync(self, model: torch.nn.Module) -> contextlib.AbstractContextManager[None]: ...

    def wait_for_everyone(self) -> None: ...

    def unwrap_model(self, model: torch.nn.Module) -> torch.nn.Module: ...


class LocalSGD:
    """Context manager for Local SGD.

    Inside it gradients are not all-reduced; call :meth:`step` after each optimizer
    step, and every ``local_sgd_steps`` steps the parameters are averaged across
    processes (and once more on exit). With ``enabled=False`` it does nothing.
    """

    def __init__(
        self,
        accelerator: Trainer,
        model: torch.nn.Module,
        local_sgd_steps: int,
        enabled: bool = True,
    ) -> None:
        if local_sgd_steps < 1:
            raise ValueError(f"LocalSGD(local_sgd_steps={local_sgd_steps}): use a number >= 1")
        self.enabled = enabled and accelerator.num_processes > 1
        self.accelerator = accelerator
        self.model = model
        self.local_sgd_steps = local_sgd_steps
        self.num_steps = 0
        self._no_sync: contextlib.AbstractContextManager[None] | None = None

    def __enter__(self) -> LocalSGD:
        if self.enabled:
            no_sync = self._no_sync = self.accelerator.no_sync(self.model)
            no_sync.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.enabled:
            self._sync_and_average()
            assert self._no_sync is not None  # entered in __enter__
            self._no_sync.__exit__(exc_type, exc, traceback)

    def step(self) -> None:
        """Count a step; average parameters every ``local_sgd_steps`` steps."""
        self.num_steps += 1
        if self.enabled and self.num_steps % self.local_sgd_steps == 0:
            self._sync_and_average()

    def _sync_and_average(self) -> None:
        self.accelerator.wait_for_everyone()
        world = dist.get_world_size()
        with torch.no_grad():
            for param in self.accelerator.unwrap_model(self.model).parameters():
                dist.all_reduce(param.data, op=dist.ReduceOp.SUM)
                param.data /= world
