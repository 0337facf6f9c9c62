"""``BackendContext``: what a backend may read of the run, without the Accelerator.

The :class:`~accel.connector.Connector` builds one context per Accelerator and gives it to
the backend it selects (``Backend(context)``). The context holds the components the
Accelerator owns (the process-wide state, the gradient state, the data-loader
configuration, the kwargs handlers, the prepared objects), never the Accelerator itself;
its properties read them, so a value that changes during the run (accumulation steps,
``sync_gradients``, ``even_batches``) is always current.

A backend does not assign what it changes: it returns or declares it
(:meth:`Backend.setup <accel.backends.Backend.setup>` returns a replacement precision,
:meth:`Backend.gradient_accumulation_steps <accel.backends.Backend.gradient_accumulation_steps>`
answers the requested steps), and the connector applies it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch.distributed.device_mesh import DeviceMesh

    from accel.kwargs import DataLoaderConfiguration, TorchDynamoPlugin
    from accel.precision.base import Precision
    from accel.prepared import PreparedObjects
    from accel.state import AcceleratorState, GradientState


class BackendContext:
    """The run as a backend sees it: state, configuration, prepared objects, current precision.

    One owner per piece of state: the context *is* the home of :attr:`precision`,
    :attr:`rng_types` and :attr:`step_scheduler_with_optimizer` (the Accelerator's
    properties of those names read and write them here, the checkpoint manager reads the
    precision here at every save and load); everything else is a property reading a
    shared component (state, gradient state, data-loader configuration). Objects built at
    ``prepare`` take what they need then, as in Accelerate: a loader its ``rng_types``, a
    scheduler ``step_scheduler_with_optimizer``, an optimizer the precision (which is why
    the precision is fixed once a model or optimizer is prepared, see :attr:`precision`).
    """

    def __init__(
        self,
        state: AcceleratorState,
        gradient_state: GradientState,
        dataloader_config: DataLoaderConfiguration,
        handlers: dict[str, Any],
        prepared: PreparedObjects,
        precision: Precision | None = None,
        rng_types: list[str] | None = None,
        step_scheduler_with_optimizer: bool = True,
    ):
        self._state = state  # read through the named properties below, never handed out
        self.gradient_state = gradient_state
        """The :class:`~accel.state.GradientState` (accumulation steps, ``sync_gradients``)."""
        self.dataloader_config = dataloader_config
        """The :class:`~accel.kwargs.DataLoaderConfiguration` data loaders are prepared with."""
        self.handlers = handlers
        """The kwargs handlers passed to the Accelerator, by class name."""
        self.prepared = prepared
        """The :class:`~accel.prepared.PreparedObjects` prepared so far, in order."""
        # None only until the connector sets it, before any backend or plugin reads it
        self._precision: Precision = None  # ty: ignore[invalid-assignment]
        if precision is not None:
            self.precision = precision
        self.rng_types = rng_types
        """The RNGs synchronised at each epoch of a prepared loader (None: the default)."""
        self.step_scheduler_with_optimizer = step_scheduler_with_optimizer
        """Whether prepared schedulers step with their optimizers."""

    @property
    def precision(self) -> Precision:
        """The run's :class:`~accel.precision.Precision`: its one home.

        Set by the connector (the selected precision, or the one ``Backend.setup``
        returns) and by ``accelerator.precision = ...``; a precision set here is given this
        context (:meth:`Precision.bind <accel.precision.Precision.bind>`). Refused once a model
        or optimizer is prepared: the models are wrapped with the precision and the optimizers
        step through its scaler, so a later change could not take effect everywhere.
        """
        return self._precision

    @precision.setter
    def precision(self, value: Precision) -> None:
        if value is not self._precision and (self.prepared.models or self.prepared.optimizers):
            raise RuntimeError(
                f"the precision cannot change after prepare(): the prepared models are wrapped "
                f"with {type(self._precision).__name__} ({self._precision.name!r}) and the "
                "optimizers step through its scaler. Choose it when creating the Accelerator "
                "(Accelerator(mixed_precision=...)), or set accelerator.precision before prepare()"
            )
        bind = getattr(value, "bind", None)  # a precision not derived from Precision has none
        if bind is not None and getattr(value, "context", None) is not self:
            bind(self)
        self._precision = value

    # -- process facts (live: read from the state) -------------------------------
    @property
    def device(self) -> torch.device:
        """The device this process computes on."""
        return self._state.device

    @property
    def distributed_type(self) -> str:
        """The distributed type (``NO``, ``MULTI_GPU``, ``FSDP``, ...)."""
        return self._state.distributed_type

    @property
    def num_processes(self) -> int:
        """Total number of processes."""
        return self._state.num_processes

    @property
    def process_index(self) -> int:
        """Global rank of this process."""
        return self._state.process_index

    @property
    def local_process_index(self) -> int:
        """Rank of this process on its machine."""
        return self._state.local_process_index

    @property
    def is_main_process(self) -> bool:
        """True on global rank 0."""
        return self._state.is_main_process

    @property
    def is_local_main_process(self) -> bool:
        """True on local rank 0."""
        return self._state.is_local_main_process

    @property
    def is_last_process(self) -> bool:
        """True on the last rank."""
        return self._state.is_last_process

    @property
    def use_distributed(self) -> bool:
        """True with more than one process."""
        return self._state.use_distributed

    @property
    def parallelism_config(self) -> Any:
        """The :class:`~accel.ParallelismConfig` (``parallelism_config=`` or ``accel launch``), or None."""
        return self._state.parallelism_config

    @property
    def torch_device_mesh(self) -> DeviceMesh | None:
        """The named ``DeviceMesh`` of :attr:`parallelism_config` (``dp_shard``, ``tp``, ``dp``, ...), or None."""
        return self._state.device_mesh

    @property
    def mixed_precision(self) -> str:
        """The name of :attr:`precision` (``no``, ``fp16``, ``bf16``, ``fp8``): derived from the
        object, so a precision set before ``prepare`` renames the run. Choose dtypes from the
        object's fields (``precision.dtype``, ``precision.fp8``), not from this name."""
        precision = self._precision
        return precision.name if precision is not None else self._state.mixed_precision

    # -- plugin objects (live) -----------------------------------------------------
    @property
    def plugins(self) -> dict[str, object]:
        """The plugin objects of the run by key (``fsdp_plugin``, ``deepspeed_plugin``,
        ``megatron_lm_plugin``): passed to the Accelerator or recorded by
        :func:`~accel.distributed.process.plugin_object`."""
        return self._state.plugins

    @property
    def dynamo_plugin(self) -> TorchDynamoPlugin | None:
        """The ``TorchDynamoPlugin`` models are compiled with (None: not compiled)."""
        return self._state.dynamo_plugin

    # -- configuration and training state (live) --------------------------------
    @property
    def split_batches(self) -> bool:
        """Whether batches are split across processes rather than one per process."""
        return self.dataloader_config.split_batches

    @property
    def even_batches(self) -> bool:
        """Whether the last batches are padded so every process gets as many."""
        return self.dataloader_config.even_batches

    @property
    def gradient_accumulation_steps(self) -> int:
        """Micro-batches per optimizer step."""
        return self.gradient_state.num_steps

    @property
    def sync_gradients(self) -> bool:
        """Whether this step synchronises gradients and steps the optimizer."""
        return self.gradient_state.sync_gradients

    # -- actions ------------------------------------------------------------------
    def wait_for_everyone(self) -> None:
        """Barrier across processes (the state's)."""
        self._state.wait_for_everyone()

    def set_process_layout(
        self,
        device: torch.device,
        num_processes: int,
        process_index: int,
        local_process_index: int,
        distributed_type: str,
        backend: str | None = None,
    ) -> None:
        """For a backend whose runtime assigns devices and ranks itself (XLA's PJRT): record them
        in the process state (see :meth:`AcceleratorState.set_process_layout
        <accel.state.PartialState.set_process_layout>`), where every reader sees them."""
        self._state.set_process_layout(
            device,
            num_processes=num_processes,
            process_index=process_index,
            local_process_index=local_process_index,
            distributed_type=distributed_type,
            backend=backend,
        )

    @contextlib.contextmanager
    def override_even_batches(self, even_batches: bool | None) -> Generator[None, None, None]:
        """Context for a join over uneven inputs: ``even_batches`` (unless None) and no empty batches.

        Sets the data-loader configuration and the batch samplers of the prepared loaders,
        and restores both on exit.
        """
        config = self.dataloader_config
        saved = config.even_batches
        if even_batches is not None:
            config.even_batches = even_batches
        samplers = [
            d.batch_sampler
            for d in self.prepared.dataloaders
            if hasattr(d, "batch_sampler") and hasattr(d.batch_sampler, "even_batches")
        ]
        previous = [(s.even_batches, s.empty_batches) for s in samplers]
        for sampler in samplers:  # a joined process may stop early: no empty padding batches
            sampler.even_batches = config.even_batches
            sampler.empty_batches = False
        try:
            yield
        finally:
            config.even_batches = saved
            for sampler, (even, empty) in zip(samplers, previous):
                sampler.even_batches = even
                sampler.empty_batches = empty

    def __repr__(self) -> str:
        return (
            f"BackendContext(distributed_type={self.distributed_type}, device={self.device}, "
            f"num_processes={self.num_processes}, mixed_precision={self.mixed_precision})"
        )
