"""The Backend ABC: everything that depends on how training is distributed.

Where Accelerate branches on ``DistributedType``, accel calls one method of the
selected backend. Every method has a default that is right for one process;
plugins (DDP, FSDP, DeepSpeed, ...) override what differs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import torch

from accel.backends.gradients import GradientsSetAside, SetAsideGradients

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from accel.backends.context import BackendContext
    from accel.optimizer import AcceleratedOptimizer
    from accel.precision.base import BackwardKwargs, Precision
    from accel.scheduler import AcceleratedScheduler

_Data = TypeVar("_Data")


class Backend:
    """A distributed strategy, chosen by ``distributed_type``.

    Subclasses set :attr:`name` and :attr:`distributed_types`, and override the
    steps that differ. A backend needing all objects at once (DeepSpeed,
    Megatron-LM) overrides :meth:`prepare`.

    A backend sees the run through :attr:`context`, a
    :class:`~accel.backends.context.BackendContext` (never the Accelerator, nor the process-wide
    state): ``device``, ``plugins``, ``dynamo_plugin``, ``parallelism_config``, the process facts
    (``num_processes``, ``process_index``, ``is_main_process``, ...), ``mixed_precision``,
    ``handlers``, ``dataloader_config``, ``split_batches``, ``even_batches``, ``rng_types``,
    ``step_scheduler_with_optimizer``, ``gradient_state``, ``gradient_accumulation_steps``,
    ``sync_gradients``, the current ``precision`` and the ``prepared`` objects.

    What a backend changes it declares, and the connector applies: :meth:`setup` returns a
    replacement precision, :meth:`gradient_accumulation_steps` answers the requested steps.

    Checkpoint files are named and written with :mod:`accel.checkpoint.layout`.
    """

    name: str = "base"
    """Short name, shown by ``accel plugins``."""
    distributed_types: tuple[str, ...] = ()
    """The ``DistributedType`` values this backend serves."""
    scales_loss_for_accumulation: bool = False
    """True when the backend divides the loss by the accumulation steps itself (DeepSpeed's
    engine): :meth:`Accelerator.backward <accel.Accelerator.backward>` then leaves it whole."""

    def __init__(self, context: BackendContext):
        self.context = context
        """What this backend may read of the run (a :class:`~accel.backends.context.BackendContext`)."""

    @property
    def supports_async_save(self) -> bool:
        """Whether ``save_state(..., async_save=True)`` may stage this backend's writes.

        Default: when it keeps core's :meth:`save_model_state` and :meth:`save_optimizer_state`
        (they write through :mod:`accel.checkpoint.layout`); a backend writing its own files
        declares it (a class attribute or property).
        """
        kind = type(self)
        return (
            kind.save_model_state is Backend.save_model_state
            and kind.save_optimizer_state is Backend.save_optimizer_state
        )

    # -- lifecycle --------------------------------------------------------
    def setup(self) -> Precision | None:
        """Called once when the Accelerator is created (validate options, set up groups).

        Returns a precision replacing the context's (a backend running its own mixed
        precision, or on another device), or None to keep it; the connector applies it.
        """
        return None

    def gradient_accumulation_steps(self, requested: int) -> int:
        """The accumulation steps to train with, given the ``requested`` ones (after :meth:`setup`).

        Default: ``requested``. A backend whose own configuration also sets them (DeepSpeed)
        answers the agreed value or raises; the connector applies the answer.
        """
        return requested

    def join_uneven_inputs(
        self, joinables: list[torch.nn.Module], even_batches: bool | None = None
    ) -> contextlib.AbstractContextManager:
        """Context in which processes with fewer batches may finish early; default: does nothing.

        A backend that joins (DDP) applies ``even_batches`` (unless None) inside the block
        through :meth:`BackendContext.override_even_batches
        <accel.backends.context.BackendContext.override_even_batches>`.
        """
        return contextlib.nullcontext()

    def tracker_values(self) -> dict[str, object]:
        """Values added to every ``accelerator.log`` call (e.g. a fault-tolerant backend's quorum
        size); default: none. Called on each ``log``: keep it cheap."""
        return {}

    # -- prepare ----------------------------------------------------------
    def prepare(self, objects: list[object], device_placement: list[bool]) -> list[object]:
        """Prepare every object; models first (optimizers may need their wrapped parameters)."""
        ctx = self.context
        result: list[object] = list(objects)
        for index, obj in enumerate(objects):
            if isinstance(obj, torch.nn.Module):
                result[index] = self.prepare_model(obj, device_placement[index])
        for index, obj in enumerate(objects):
            if isinstance(obj, torch.optim.Optimizer):
                result[index] = self.prepare_optimizer(obj, device_placement[index])
            elif isinstance(obj, torch.utils.data.DataLoader):
                result[index] = self.prepare_data_loader(obj, device_placement[index])
        for index, obj in enumerate(objects):
            if isinstance(obj, torch.optim.lr_scheduler.LRScheduler) or _looks_like_scheduler(obj):
                optimizers = ctx.prepared.optimizers_of(obj, also=result)
                result[index] = self.prepare_scheduler(obj, optimizers)
        return result

    def prepare_model(
        self, model: torch.nn.Module, device_placement: bool = True, evaluation_mode: bool = False
    ) -> torch.nn.Module:
        """Place the model, apply mixed precision, :meth:`wrap_model` (unless evaluating), then :meth:`compile_model`."""
        ctx = self.context
        if device_placement:
            model = model.to(ctx.device)
        model = ctx.precision.wrap_model(model)
        if not evaluation_mode:
            model = self.wrap_model(model)
        return self.compile_model(model)

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Wrap a placed model for this strategy (DDP, FSDP, ...); the default leaves it as is."""
        return model

    def compile_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Compile ``model`` as the state's ``dynamo_plugin`` says (``torch.compile``, or regional
        compilation of its repeated blocks); unchanged when dynamo is off."""
        from accel.compilation import compile_module, compile_regions_in_place

        plugin = self.context.dynamo_plugin
        if plugin is None or not plugin.enabled:
            return model
        if plugin.use_regional_compilation:
            return compile_regions_in_place(model, **plugin.to_compile_kwargs())
        return compile_module(model, plugin.to_compile_kwargs())

    def prepare_optimizer(
        self, optimizer: torch.optim.Optimizer, device_placement: bool = True
    ) -> AcceleratedOptimizer:
        """Wrap the optimizer in :class:`~accel.optimizer.AcceleratedOptimizer`."""
        from accel.optimizer import AcceleratedOptimizer

        return AcceleratedOptimizer(
            optimizer, precision=self.context.precision, device_placement=device_placement
        )

    def data_parallel_shard(self) -> tuple[int, int]:
        """``(number of shards, this process's shard)`` that data is split over; default: every process.

        The prepared data loaders (also with ``dispatch_batches``) and
        ``Accelerator.split_between_processes`` use it. Backends with tensor / context
        parallelism override it with the data-parallel size and rank, so the ranks of one
        group get the same data; the default is ``(num_processes, process_index)``.
        """
        return self.context.num_processes, self.context.process_index

    def prepare_data_loader(
        self, dataloader: torch.utils.data.DataLoader, device_placement: bool = True
    ) -> torch.utils.data.DataLoader:
        """Shard the data loader for this process and place its batches (core's
        :class:`~accel.data.shard.DataLoaderShard`; a backend may return its own loader)."""
        from accel.data.loader import prepare_data_loader

        ctx = self.context
        config = ctx.dataloader_config
        num_processes, process_index = self.data_parallel_shard()
        return prepare_data_loader(
            dataloader,
            device=ctx.device,
            num_processes=num_processes,
            process_index=process_index,
            split_batches=config.split_batches,
            put_on_device=device_placement,
            even_batches=config.even_batches,
            rng_types=["generator"] if ctx.rng_types is None else list(ctx.rng_types),
            use_seedable_sampler=config.use_seedable_sampler,
            data_seed=config.data_seed,
            non_blocking=config.non_blocking,
            dispatch_batches=config.dispatch_batches,
            use_stateful_dataloader=config.use_stateful_dataloader,
            empty_batches=config.empty_batches,
        )

    def deepspeed_ulysses_dl_adapter(
        self, dataloader: _Data, model: torch.nn.Module | None = None
    ) -> _Data:
        """``dataloader`` cut to this rank's sequence slice under sequence parallelism.

        What ``Accelerator.deepspeed_ulysses_dl_adapter`` (Accelerate's name) asks; default:
        ``dataloader`` unchanged. accel-deepspeed's backend cuts it under DeepSpeed-Ulysses.
        """
        return dataloader

    def prepare_scheduler(
        self, scheduler: object, optimizers: list[torch.optim.Optimizer]
    ) -> AcceleratedScheduler:
        """Wrap the scheduler so it steps with its optimizers."""
        from accel.scheduler import AcceleratedScheduler

        ctx = self.context
        return AcceleratedScheduler(
            scheduler,
            optimizers,
            step_with_optimizer=ctx.step_scheduler_with_optimizer,
            split_batches=ctx.dataloader_config.split_batches,
            num_processes=self.data_parallel_shard()[0],
        )

    # -- training step ----------------------------------------------------
    @property
    def micro_batching_refusal(self) -> str | None:
        """Why ``Accelerator.train_step`` (automatic micro-batching) cannot run on this backend,
        in one line; None when it can."""
        return None

    reduces_gradients_after_no_sync: bool = True
    """Whether :meth:`synchronize_gradients` reduces the gradients that backward passes under
    :meth:`no_sync` accumulated. When False, ``train_step`` runs the last micro-batch of a
    synchronising step outside ``no_sync``, so that its backward reduces them (FSDP)."""

    def synchronize_gradients(self, models: list[torch.nn.Module]) -> None:
        """Average across processes the gradients accumulated under :meth:`no_sync`.

        ``train_step`` calls it once per synchronising step, after every process agreed that
        the step's micro-batches all fitted. Default: nothing (one process).
        """

    def set_aside_gradients(self, model: torch.nn.Module) -> GradientsSetAside:
        """Take the gradients accumulated so far off ``model`` for one attempt of a step.

        Returns an object whose ``merge()`` adds them back to the attempt's gradients and whose
        ``discard()`` drops the attempt's gradients and restores them. Default: the parameters'
        ``.grad``; a backend keeping gradients elsewhere (FSDP2's unsharded ones) extends it.
        """
        return SetAsideGradients(model.parameters())

    def agreement_modules(self, model: torch.nn.Module) -> list[torch.nn.Module]:
        """Submodules of ``model`` whose forward starts with a collective (FSDP2's units).

        While ``train_step`` runs, every process agrees on the attempt before each of their
        forwards, so that an out-of-memory error in the middle of a forward on some processes
        meets the others before they enter the next collective. Default: none.
        """
        return []

    def reset_after_failed_attempt(self, model: torch.nn.Module) -> None:
        """Bring ``model`` back to its state between steps after an attempt of ``train_step``
        failed (a forward or backward left part-way). Called before its gradients are discarded.
        Default: nothing."""

    def backward(self, loss: torch.Tensor, **kwargs: Unpack[BackwardKwargs]) -> None:
        """Back-propagate ``loss`` (already divided for accumulation) through the precision."""
        self.context.precision.backward(loss, **kwargs)

    @contextlib.contextmanager
    def no_sync(self, model: torch.nn.Module) -> Generator[None, None, None]:
        """Context in which gradients are not synchronised across processes."""
        context = getattr(model, "no_sync", None)
        with context() if callable(context) else contextlib.nullcontext():
            yield

    @contextlib.contextmanager
    def trigger_sync_in_backward(self, model: torch.nn.Module) -> Generator[None, None, None]:
        """Context whose next backward synchronises gradients even after forwards under :meth:`no_sync`.

        Default: does nothing (one process, or a backend with nothing to synchronise).
        """
        yield

    def clip_grad_norm_(
        self, parameters: Iterable[torch.Tensor], max_norm: float, norm_type: float = 2.0
    ) -> torch.Tensor | None:
        """Clip gradients to ``max_norm`` and return the total norm (None where the backend
        clips inside ``optimizer.step()`` instead: Megatron-LM)."""
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=norm_type)

    def context_parallel(
        self,
        buffers: list[torch.Tensor] | None = None,
        buffer_seq_dims: list[int] | None = None,
        no_restore_buffers: set[torch.Tensor] | None = None,
    ) -> contextlib.AbstractContextManager:
        """Context splitting ``buffers`` over a context-parallel group; default: does nothing."""
        return contextlib.nullcontext()

    def clip_grad_value_(self, parameters: Iterable[torch.Tensor], clip_value: float) -> None:
        """Clip each gradient element to ``[-clip_value, clip_value]``."""
        torch.nn.utils.clip_grad_value_(parameters, clip_value)

    # -- collectives --------------------------------------------------------
    def gather(self, tensor: _Data) -> _Data:
        """Concatenate ``tensor`` (nested) from every process; default: through torch.distributed.

        ``gather``, :meth:`gather_object`, :meth:`gather_uneven` and :meth:`reduce` are the
        Accelerator's collectives (``gather``, ``gather_for_metrics``, ``reduce``): a backend
        overriding one to run over a subgroup overrides all four alike.
        """
        from accel.distributed.operations import gather

        return gather(tensor)

    def gather_object(self, obj: object) -> list[object]:
        """Gather a picklable ``obj`` from every process, in process order (lists are concatenated).

        ``gather_for_metrics`` calls it for non-tensor data and ``use_gather_object=True``;
        default: :func:`accel.distributed.operations.gather_object`. A backend whose ranks
        hold copies of one batch (tensor / context parallelism) gathers one copy per batch.
        """
        from accel.distributed.operations import gather_object

        return gather_object(obj)

    def gather_uneven(self, tensor: _Data) -> _Data:
        """Concatenate ``tensor`` (nested) whose first dimension differs across processes.

        ``gather_for_metrics`` calls it with ``even_batches=False``; default:
        :func:`accel.distributed.operations.gather_uneven`. Over the same processes as :meth:`gather`.
        """
        from accel.distributed.operations import gather_uneven

        return gather_uneven(tensor)

    def reduce(self, tensor: _Data, reduction: str = "sum", scale: float = 1.0) -> _Data:
        """All-reduce ``tensor`` (nested; ``sum`` or ``mean``); default: through torch.distributed."""
        from accel.distributed.operations import reduce

        return reduce(tensor, reduction, scale)

    def wait_for_everyone(self) -> None:
        """Barrier across processes; default: the process state's barrier."""
        self.context.wait_for_everyone()

    # -- models and state -------------------------------------------------
    def unwrap_model(
        self,
        model: torch.nn.Module,
        keep_fp32_wrapper: bool = True,
        keep_torch_compile: bool = True,
    ) -> torch.nn.Module:
        """Remove the wrappers accel added (DDP-like ``.module``, compilation, precision)."""
        from accel.unwrap import extract_model_from_parallel

        return extract_model_from_parallel(
            model, keep_fp32_wrapper=keep_fp32_wrapper, keep_torch_compile=keep_torch_compile
        )

    def get_state_dict(
        self, model: torch.nn.Module, unwrap: bool = True
    ) -> dict[str, torch.Tensor]:
        """A full state dict of ``model`` (gathered if it is sharded)."""
        if unwrap:
            model = self.unwrap_model(model)
        return model.state_dict()

    def load_model_state_dict(
        self, model: torch.nn.Module, state_dict: dict[str, torch.Tensor], strict: bool = True
    ) -> object:
        """Load a full state dict into a (possibly wrapped) model."""
        return self.unwrap_model(model).load_state_dict(state_dict, strict=strict)

    # -- checkpoints (called on every process) ------------------------------
    def save_model_state(
        self, model: torch.nn.Module, folder: Path, index: int, safe_serialization: bool = True
    ) -> None:
        """Write model ``index`` into checkpoint ``folder``; default: a full state dict from the main process."""
        from accel.checkpoint.layout import write_model_weights

        state_dict = self.get_state_dict(model, unwrap=True)
        if self.context.is_main_process:
            write_model_weights(state_dict, folder, index, safe_serialization)

    def load_model_state(
        self,
        model: torch.nn.Module,
        folder: Path,
        index: int,
        strict: bool = True,
        weights_only: bool = True,
    ) -> None:
        """Restore model ``index`` from checkpoint ``folder``."""
        from accel.checkpoint.layout import read_model_weights

        self.load_model_state_dict(
            model, read_model_weights(folder, index, weights_only), strict=strict
        )

    def save_optimizer_state(
        self,
        optimizer: torch.optim.Optimizer,
        folder: Path,
        index: int,
        model: torch.nn.Module | None = None,
    ) -> None:
        """Write optimizer ``index`` into checkpoint ``folder``; default: its state dict from the main process."""
        from accel.checkpoint.layout import optimizer_file, write_object

        if self.context.is_main_process:
            write_object(optimizer.state_dict(), optimizer_file(folder, index))

    def load_optimizer_state(
        self,
        optimizer: torch.optim.Optimizer,
        folder: Path,
        index: int,
        model: torch.nn.Module | None = None,
        weights_only: bool = True,
    ) -> None:
        """Restore optimizer ``index`` from checkpoint ``folder``."""
        from accel.checkpoint.layout import optimizer_file, read_object

        optimizer.load_state_dict(read_object(optimizer_file(folder, index), weights_only))


def _looks_like_scheduler(obj: object) -> bool:
    return (
        hasattr(obj, "step")
        and hasattr(obj, "optimizer")
        and hasattr(obj, "state_dict")
        and not isinstance(obj, torch.optim.Optimizer)
    )
