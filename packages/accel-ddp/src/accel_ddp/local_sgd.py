"""LocalSGD: train without gradient synchronisation and average parameters every ``local_sgd_steps``."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


class LocalSGD:
    """Context manager for Local SGD.

    Inside it gradients are not all-reduced; call :meth:`step` after each optimizer
    step, and every ``local_sgd_steps`` steps the parameters are averaged across
    processes (and once more on exit). With ``enabled=False`` it does nothing.
    """

    def __init__(
        self, accelerator: Any, model: torch.nn.Module, local_sgd_steps: int, enabled: bool = True
    ):
        if local_sgd_steps < 1:
            raise ValueError(f"LocalSGD(local_sgd_steps={local_sgd_steps}): use a number >= 1")
        self.enabled = enabled and accelerator.num_processes > 1
        self.accelerator = accelerator
        self.model = model
        self.local_sgd_steps = local_sgd_steps
        self.num_steps = 0
        self._no_sync: Any = None

    def __enter__(self) -> LocalSGD:
        if self.enabled:
            self._no_sync = self.accelerator.no_sync(self.model)
            self._no_sync.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.enabled:
            self._sync_and_average()
            self._no_sync.__exit__(*exc)

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
