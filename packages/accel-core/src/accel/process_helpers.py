"""The Accelerator's view of the processes, delegated to :class:`~accel.state.AcceleratorState`.

:class:`ProcessHelpers` holds what an :class:`~accel.Accelerator` says about the process
it runs in (``device``, ``process_index``, ``is_main_process``, ...) and the helpers that
run code on some processes only (``on_main_process``, ``main_process_first``,
``split_between_processes``, ``print``). Each one reads or calls ``self.state`` (the
split asks ``self.backend`` for the data-parallel shard); the Accelerator inherits them,
so they are used as ``accelerator.is_main_process``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from accel.state import split_inputs

if TYPE_CHECKING:
    import torch

    from accel.backends.base import Backend
    from accel.state import AcceleratorState


class ProcessHelpers:
    """Identity of this process and per-process helpers, read from ``self.state`` (a mixin of
    :class:`~accel.Accelerator`)."""

    state: AcceleratorState
    """The process-wide :class:`~accel.state.AcceleratorState` every member delegates to."""
    backend: Backend
    """The :class:`~accel.backends.base.Backend`; ``split_between_processes`` asks it for the data-parallel shard."""

    # -- who this process is ----------------------------------------------------
    @property
    def device(self) -> torch.device:
        """The device this process computes on."""
        return self.state.device

    @property
    def distributed_type(self) -> str:
        """The distributed type (``DistributedType.NO``, ``MULTI_GPU``, ``FSDP``, ...)."""
        return self.state.distributed_type

    @property
    def num_processes(self) -> int:
        """Total number of processes."""
        return self.state.num_processes

    @property
    def process_index(self) -> int:
        """Global rank of this process."""
        return self.state.process_index

    @property
    def local_process_index(self) -> int:
        """Rank of this process on its machine."""
        return self.state.local_process_index

    @property
    def is_main_process(self) -> bool:
        """True on global rank 0."""
        return self.state.is_main_process

    @property
    def is_local_main_process(self) -> bool:
        """True on local rank 0."""
        return self.state.is_local_main_process

    @property
    def is_last_process(self) -> bool:
        """True on the last rank."""
        return self.state.is_last_process

    @property
    def use_distributed(self) -> bool:
        """True with more than one process."""
        return self.state.use_distributed

    @property
    def mixed_precision(self) -> str:
        """The mixed-precision mode."""
        return self.state.mixed_precision

    @property
    def parallelism_config(self) -> Any:
        """The :class:`~accel.ParallelismConfig` (``parallelism_config=`` or ``accel launch``), or None."""
        return self.state.parallelism_config

    @property
    def torch_device_mesh(self) -> Any:
        """The named ``DeviceMesh`` of :attr:`parallelism_config` (``dp_shard``, ``tp``, ``dp``, ...), or None."""
        return self.state.device_mesh

    # -- code for some processes only ---------------------------------------------
    def print(self, *args: Any, **kwargs: Any) -> None:
        """``print`` once per machine."""
        self.state.print(*args, **kwargs)

    def on_main_process(self, function: Callable | None = None) -> Callable:
        """Decorator: run only on the main process."""
        return self.state.on_main_process(function)

    def on_local_main_process(self, function: Callable | None = None) -> Callable:
        """Decorator: run only on each machine's main process."""
        return self.state.on_local_main_process(function)

    def on_last_process(self, function: Callable | None = None) -> Callable:
        """Decorator: run only on the last process."""
        return self.state.on_last_process(function)

    def on_process(
        self, function: Callable | None = None, process_index: int | None = None
    ) -> Callable:
        """Decorator: run only on rank ``process_index``."""
        return self.state.on_process(function, process_index=process_index)

    def on_local_process(
        self,
        function: Callable | None = None,
        local_process_index: int | None = None,
        *,
        local_process_idx: int | None = None,
    ) -> Callable:
        """Decorator: run only on local rank ``local_process_index`` (``local_process_idx``, the seed's spelling)."""
        if local_process_index is None:
            local_process_index = local_process_idx
        return self.state.on_local_process(function, local_process_index=local_process_index)

    @contextlib.contextmanager
    def main_process_first(self) -> Iterator[None]:
        """The main process runs the block first."""
        with self.state.main_process_first():
            yield

    @contextlib.contextmanager
    def local_main_process_first(self) -> Iterator[None]:
        """Each machine's main process runs the block first."""
        with self.state.local_main_process_first():
            yield

    @contextlib.contextmanager
    def split_between_processes(self, inputs: Any, apply_padding: bool = False) -> Iterator[Any]:
        """This process's contiguous share of ``inputs`` (list, tuple, dict of sequences, tensor).

        Split over the backend's data-parallel ranks (``backend.data_parallel_shard()``), as
        the data loaders are: under tensor / context parallelism every rank of one group gets
        the same share. With ``apply_padding`` every share has the same length, the last
        element repeated.
        """
        num_shards, shard = self.backend.data_parallel_shard()
        yield split_inputs(inputs, num_shards, shard, apply_padding)
