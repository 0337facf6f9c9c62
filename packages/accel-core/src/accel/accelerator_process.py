"""Who this process is, and code for some processes only: the :class:`~accel.Accelerator`'s
members over its backend context and the process-wide state.

:class:`ProcessMixin`, a base of ``Accelerator``, answers ``accelerator.process_index``,
``accelerator.is_main_process``, ``accelerator.even_batches``, ... from
``accelerator.backend_context`` (the :class:`~accel.backends.BackendContext` its backend
reads too), and ``accelerator.on_main_process``, ``accelerator.print``, ... from
``accelerator.state``. Each member is written out, so editors and type checkers follow it to
the component that holds the logic.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

    from accel.backends.context import BackendContext
    from accel.kwargs import DataLoaderConfiguration
    from accel.parallelism_config import ParallelismConfig
    from accel.state import AcceleratorState, GradientState


class ProcessMixin:
    """The process facts and process-only helpers of :class:`~accel.Accelerator`."""

    if TYPE_CHECKING:  # the Accelerator's attributes these members read
        backend_context: BackendContext
        state: AcceleratorState
        gradient_state: GradientState

    # -- who this process is ------------------------------------------------------
    @property
    def device(self) -> torch.device:
        """The device this process computes on."""
        return self.backend_context.device

    @property
    def distributed_type(self) -> str:
        """The distributed type (``NO``, ``MULTI_GPU``, ``FSDP``, ...)."""
        return self.backend_context.distributed_type

    @property
    def num_processes(self) -> int:
        """Total number of processes."""
        return self.backend_context.num_processes

    @property
    def process_index(self) -> int:
        """Global rank of this process."""
        return self.backend_context.process_index

    @property
    def local_process_index(self) -> int:
        """Rank of this process on its machine."""
        return self.backend_context.local_process_index

    @property
    def is_main_process(self) -> bool:
        """True on global rank 0."""
        return self.backend_context.is_main_process

    @property
    def is_local_main_process(self) -> bool:
        """True on local rank 0."""
        return self.backend_context.is_local_main_process

    @property
    def is_last_process(self) -> bool:
        """True on the last rank."""
        return self.backend_context.is_last_process

    @property
    def use_distributed(self) -> bool:
        """True with more than one process."""
        return self.backend_context.use_distributed

    @property
    def mixed_precision(self) -> str:
        """The name of the run's precision (``no``, ``fp16``, ``bf16``, ``fp8``), derived from
        :attr:`precision`; fixed when the Accelerator is created."""
        return self.backend_context.mixed_precision

    @mixed_precision.setter
    def mixed_precision(self, value: str) -> None:
        raise AttributeError(
            "mixed_precision is fixed when the Accelerator is created (as in Accelerate): "
            "pass Accelerator(mixed_precision=...) or ACCEL_MIXED_PRECISION"
        )

    @property
    def parallelism_config(self) -> ParallelismConfig | None:
        """The :class:`~accel.ParallelismConfig` (``parallelism_config=`` or ``accel launch``), or None."""
        return self.backend_context.parallelism_config

    @property
    def torch_device_mesh(self) -> DeviceMesh | None:
        """The named ``DeviceMesh`` of :attr:`parallelism_config` (``dp_shard``, ``tp``, ``dp``, ...), or None."""
        return self.backend_context.torch_device_mesh

    # -- code for some processes only ------------------------------------------------
    def print(self, *args: object, **kwargs: object) -> None:
        """``print`` on the local main process only."""
        self.state.print(*args, **kwargs)

    def on_main_process(self, function: Callable | None = None) -> Callable:
        """Decorator: run ``function`` only on the main process."""
        return self.state.on_main_process(function)

    def on_local_main_process(self, function: Callable | None = None) -> Callable:
        """Decorator: run ``function`` only on each machine's local main process."""
        return self.state.on_local_main_process(function)

    def on_last_process(self, function: Callable | None = None) -> Callable:
        """Decorator: run ``function`` only on the last process."""
        return self.state.on_last_process(function)

    def on_process(
        self, function: Callable | None = None, process_index: int | None = None
    ) -> Callable:
        """Decorator: run ``function`` only on global rank ``process_index``."""
        return self.state.on_process(function, process_index)

    def on_local_process(
        self,
        function: Callable | None = None,
        local_process_index: int | None = None,
        *,
        local_process_idx: int | None = None,
    ) -> Callable:
        """Decorator: run ``function`` only on local rank ``local_process_index`` (``local_process_idx``, the seed's spelling)."""
        return self.state.on_local_process(
            function, local_process_index, local_process_idx=local_process_idx
        )

    @contextlib.contextmanager
    def main_process_first(self) -> Generator[None, None, None]:
        """The main process runs the block first, then the others."""
        with self.state.main_process_first():
            yield

    @contextlib.contextmanager
    def local_main_process_first(self) -> Generator[None, None, None]:
        """The local main process of each machine runs the block first."""
        with self.state.local_main_process_first():
            yield

    # -- configuration and training state (shared with the backend context) ---------------
    @property
    def dataloader_config(self) -> DataLoaderConfiguration:
        """The :class:`~accel.kwargs.DataLoaderConfiguration` data loaders are prepared with."""
        return self.backend_context.dataloader_config

    @dataloader_config.setter
    def dataloader_config(self, value: DataLoaderConfiguration) -> None:
        self.backend_context.dataloader_config = value

    @property
    def rng_types(self) -> list[str] | None:
        """The RNGs synchronised at each epoch of a prepared loader (None: the default)."""
        return self.backend_context.rng_types

    @rng_types.setter
    def rng_types(self, value: list[str] | None) -> None:
        self.backend_context.rng_types = value

    @property
    def step_scheduler_with_optimizer(self) -> bool:
        """Whether prepared schedulers step with their optimizers."""
        return self.backend_context.step_scheduler_with_optimizer

    @step_scheduler_with_optimizer.setter
    def step_scheduler_with_optimizer(self, value: bool) -> None:
        self.backend_context.step_scheduler_with_optimizer = value

    @property
    def split_batches(self) -> bool:
        """Whether batches are split across processes rather than one per process."""
        return self.backend_context.split_batches

    # The other DataLoaderConfiguration fields, read-only as in Accelerate (transformers reads them).
    @property
    def dispatch_batches(self) -> bool | None:
        """Whether the main process loads each batch and sends every process its share
        (None: only for iterable datasets)."""
        return self.dataloader_config.dispatch_batches

    @property
    def use_seedable_sampler(self) -> bool:
        """Whether loaders shuffle with a seedable sampler (reproducible order)."""
        return self.dataloader_config.use_seedable_sampler

    @property
    def non_blocking(self) -> bool:
        """Whether batches move to the device with ``non_blocking=True``."""
        return self.dataloader_config.non_blocking

    @property
    def use_stateful_dataloader(self) -> bool:
        """Whether prepared loaders are torchdata ``StatefulDataLoader`` s."""
        return self.dataloader_config.use_stateful_dataloader

    @property
    def even_batches(self) -> bool:
        """Whether the last batches are padded so every process gets as many."""
        return self.backend_context.even_batches

    @even_batches.setter
    def even_batches(self, value: bool) -> None:
        self.dataloader_config.even_batches = value

    @property
    def gradient_accumulation_steps(self) -> int:
        """Micro-batches per optimizer step."""
        return self.backend_context.gradient_accumulation_steps

    @gradient_accumulation_steps.setter
    def gradient_accumulation_steps(self, steps: int) -> None:
        self.gradient_state.plugin_kwargs["num_steps"] = steps

    @property
    def sync_gradients(self) -> bool:
        """Whether this step synchronises gradients and steps the optimizer."""
        return self.backend_context.sync_gradients

    @sync_gradients.setter
    def sync_gradients(self, value: bool) -> None:
        self.gradient_state._set_sync_gradients(value)
