"""The Accelerator: the four lines that make one training script run anywhere.

It owns no distributed logic itself: everything that depends on how training is
distributed is asked of the selected :class:`~accel.backends.Backend`, and
everything numeric of the :class:`~accel.precision.Precision`.
"""

from __future__ import annotations

import contextlib
import operator
import os
from collections.abc import Callable, Generator, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import torch

from accel import env_vars
from accel.accelerator_checkpointing import CheckpointingMixin
from accel.accelerator_process import ProcessMixin
from accel.backends.base import Backend
from accel.checkpoint.manager import CheckpointManager
from accel.checkpoint.view import RunView
from accel.config.core_options import KEYS, PROCESS_SECTION
from accel.connector import Connector
from accel.contexts import NO_CONTEXT as _NO_CONTEXT
from accel.contexts import no_sync_all as _no_sync_all
from accel.distributed.operations import (
    is_tensor_structure,
    pad_across_processes,
    recursively_apply,
)
from accel.errors import MissingPluginError, UsageError, report_refusals_in_one_line
from accel.kwargs import (
    DataLoaderConfiguration,
    GradientAccumulationPlugin,
    KwargsHandler,
    ProjectConfiguration,
    TorchDynamoPlugin,
)
from accel.logging import get_logger
from accel.microbatch import MicroBatching
from accel.optimizer import fused_backward
from accel.precision.base import Precision
from accel.prepared import PreparedObjects
from accel.state import AcceleratorState, GradientState, split_inputs
from accel.throughput.monitor import ThroughputKwargs, ThroughputMonitor
from accel.tracking.manager import TrackerManager

if TYPE_CHECKING:
    from accel.kwargs import AutocastKwargs
    from accel.optimizer import AcceleratedOptimizer
    from accel.parallelism_config import ParallelismConfig
    from accel.scheduler import AcceleratedScheduler
    from accel.tracking.base import GeneralTracker
    from accel.tracking.manager import LogWith


T = TypeVar("T")
"""A value returned as the same kind it was given (a tensor, or nested tensors; a data loader)."""
B = TypeVar("B")
"""A batch, as the data loader yields it."""

logger = get_logger(__name__)  # kept as a module attribute (Accelerate's module has one)


class Accelerator(ProcessMixin, CheckpointingMixin):
    """Prepare models, optimizers, data loaders and schedulers for the configured hardware and strategy.

    Arguments follow Accelerate's: ``mixed_precision``, ``gradient_accumulation_steps``,
    ``cpu``, ``dataloader_config``, ``log_with``, ``project_dir`` / ``project_config``,
    ``gradient_accumulation_plugin``, ``step_scheduler_with_optimizer``,
    ``kwargs_handlers``, ``dynamo_backend`` / ``dynamo_plugin``, and plugin objects
    (``fsdp_plugin``, ``deepspeed_plugin``, ``megatron_lm_plugin``) from their plugin packages,
    and ``parallelism_config`` (a :class:`~accel.ParallelismConfig`: N-D parallelism).

    Its parts are public components: :attr:`prepared` (what was prepared, a
    :class:`~accel.prepared.PreparedObjects`), :attr:`backend` and :attr:`precision` (chosen
    by :class:`~accel.connector.Connector`), :attr:`checkpoints` (a
    :class:`~accel.checkpoint.manager.CheckpointManager`) and :attr:`tracking` (a
    :class:`~accel.tracking.manager.TrackerManager`). What it says about the processes
    (``device``, ``process_index``, ``is_main_process``, ...) is read from
    :attr:`backend_context`, the same :class:`~accel.backends.BackendContext` its backend
    reads; the helpers that run code on some processes only (``on_main_process``,
    ``main_process_first``, ``print``, ...) are the process-wide :attr:`state`'s.
    """

    fsdp_on_cpu: bool = True
    """Whether FSDP shards when every process runs on CPU (accel's rule, so that FSDP runs
    and is tested without GPUs). A subclass that sets it False gets Accelerate's rule: FSDP
    asked for on CPU processes is dropped and the run is data-parallel; the ``accelerate``
    distribution's ``accelerate.Accelerator`` does, so the Hugging Face stack gets
    Accelerate's behaviour and numbers there. ``ACCEL_FSDP_ON_CPU=1`` shards anyway."""

    def __init__(
        self,
        device_placement: bool = True,
        split_batches: bool | None = None,
        mixed_precision: str | None = None,
        gradient_accumulation_steps: int = 1,
        cpu: bool = False,
        dataloader_config: DataLoaderConfiguration | None = None,
        deepspeed_plugin: object = None,
        fsdp_plugin: object = None,
        megatron_lm_plugin: object = None,
        rng_types: list[str] | None = None,
        log_with: LogWith = None,
        project_dir: str | os.PathLike | None = None,
        project_config: ProjectConfiguration | None = None,
        gradient_accumulation_plugin: GradientAccumulationPlugin | None = None,
        step_scheduler_with_optimizer: bool = True,
        kwargs_handlers: list[KwargsHandler] | None = None,
        dynamo_backend: str | None = None,
        dynamo_plugin: TorchDynamoPlugin | None = None,
        debug: bool | None = None,
        parallelism_config: ParallelismConfig | None = None,
        **plugin_objects: object,
    ):
        self.project_configuration = project_config or ProjectConfiguration()
        if project_dir is not None:
            self.project_configuration.set_directories(os.fspath(project_dir))
        self.handlers: dict[str, KwargsHandler] = {}
        for handler in kwargs_handlers or []:
            kind = type(handler).__name__
            if kind in self.handlers:
                raise ValueError(f"only one {kind} may be passed in kwargs_handlers")
            self.handlers[kind] = handler
        if dynamo_plugin is None:
            dynamo_plugin = (
                TorchDynamoPlugin(backend=dynamo_backend)
                if dynamo_backend is not None
                else TorchDynamoPlugin()
            )
        if debug is not None:
            os.environ[env_vars.DEBUG_MODE] = "1" if debug else "0"
        self.state = AcceleratorState(
            mixed_precision=mixed_precision,
            cpu=cpu,
            dynamo_plugin=dynamo_plugin,
            deepspeed_plugin=deepspeed_plugin,
            fsdp_plugin=fsdp_plugin,
            megatron_lm_plugin=megatron_lm_plugin,
            init_process_group_kwargs=self.handlers.get("InitProcessGroupKwargs"),
            _from_accelerator=True,
            fsdp_on_cpu=self.fsdp_on_cpu or PROCESS_SECTION["fsdp_on_cpu"].from_env(),
            parallelism_config=parallelism_config,
            **plugin_objects,
        )
        if debug is not None:
            self.state.debug = debug
        if PROCESS_SECTION["launch_config"].from_env():  # run by `accel launch`
            report_refusals_in_one_line()
        self.device_placement = device_placement
        config = dataloader_config or DataLoaderConfiguration()
        if split_batches is not None:
            config.split_batches = split_batches
        self.gradient_state = GradientState(
            gradient_accumulation_plugin=self._accumulation_plugin(
                gradient_accumulation_plugin, gradient_accumulation_steps
            )
        )
        self.prepared = PreparedObjects()
        """Everything prepared (and registered for checkpointing), in order."""
        connector = Connector(self.state, self.handlers)
        self.backend_context = connector.context(
            self.gradient_state, config, self.prepared, rng_types, step_scheduler_with_optimizer
        )
        """What the backend reads of this run (a :class:`~accel.backends.BackendContext`)."""
        try:
            # the precision lives in the context (its one home); the backend reads it there
            self.backend = connector.connect(self.backend_context)[1]
        except BaseException:
            AcceleratorState._reset_state()  # a failed Accelerator must not poison the next one
            raise
        self.step = 0
        self.flag_tensor: torch.Tensor | None = None
        self.micro_batching = MicroBatching(self.backend_context)
        """The split of :meth:`train_step` (saved by ``save_state``; docs/fitting-the-machine.md)."""
        # reads the prepared objects, the state and the current precision from the context
        self.checkpoints = CheckpointManager(
            self.backend_context, self.backend, self.project_configuration
        )
        """Saving and resuming: ``save_state`` / ``load_state`` / ``save_model`` and their hooks."""
        self.tracking = TrackerManager(log_with, self.state, self.project_configuration)
        """The experiment trackers of ``log_with``."""
        self.throughput = ThroughputMonitor(
            ThroughputKwargs.find(self.handlers),
            device=self.device,
            process_index=self.process_index,
            num_processes=self.num_processes,
            mixed_precision=self.mixed_precision,
            reduce=self.backend.reduce,  # not the Accelerator's own methods: no reference cycle
            log=self.tracking.log,
        )
        """Samples, tokens and optimizer steps per second, FLOPs and MFU (docs/fitting-the-machine.md)."""
        self.micro_batching.counters.append(self.throughput)  # a retried batch counts once
        self.tracking.value_sources.append(self.backend.tracker_values)
        from accel.faults import preemption

        self.preemption = preemption.install(
            self.save_state,
            preemption.PreemptionKwargs.find(self.handlers),
            process_index=self.state.process_index,
            device=self.state.device,
            project_configuration=self.project_configuration,
        )
        """The SIGTERM handler when preemption handling is on (docs/fault-tolerance.md), else None."""

    # -- construction helpers ---------------------------------------------
    @staticmethod
    def _accumulation_plugin(
        plugin: GradientAccumulationPlugin | None, steps: int
    ) -> GradientAccumulationPlugin:
        if plugin is not None:
            if steps != 1:
                raise ValueError(
                    "pass either gradient_accumulation_steps or gradient_accumulation_plugin, not both"
                )
            return plugin
        env_steps = KEYS["gradient_accumulation_steps"].from_env()
        if steps == 1 and env_steps is not None:
            steps = env_steps
        return GradientAccumulationPlugin(num_steps=steps)

    # -- who this process is, and code for some processes only: ProcessMixin ------
    @contextlib.contextmanager
    def split_between_processes(
        self, inputs: T, apply_padding: bool = False
    ) -> Generator[T, None, None]:
        """This process's contiguous share of ``inputs`` (list, tuple, dict of sequences, tensor).

        Split over the backend's data-parallel ranks (``backend.data_parallel_shard()``), as
        the data loaders are: under tensor / context parallelism every rank of one group gets
        the same share. With ``apply_padding`` every share has the same length, the last
        element repeated.
        """
        num_shards, shard = self.backend.data_parallel_shard()
        yield split_inputs(inputs, num_shards, shard, apply_padding)

    @property
    def project_dir(self) -> str | None:
        """The project directory (checkpoints go under ``checkpoints/``)."""
        return self.project_configuration.project_dir

    @property
    def logging_dir(self) -> str | None:
        """Where trackers write."""
        return self.project_configuration.logging_dir

    @property
    def optimizer_step_was_skipped(self) -> bool:
        """Whether the last optimizer step was skipped (fp16 overflow)."""
        return any(getattr(o, "step_was_skipped", False) for o in self.prepared.optimizers)

    @property
    def scaler(self) -> torch.amp.GradScaler | None:
        """The fp16 gradient scaler, if any."""
        return self.precision.scaler

    def maybe_context_parallel(
        self,
        buffers: list[torch.Tensor] | None = None,
        buffer_seq_dims: list[int] | None = None,
        no_restore_buffers: set[torch.Tensor] | None = None,
    ) -> contextlib.AbstractContextManager:
        """Context in which ``buffers`` are split along their sequence dims over the ``cp`` group.

        A no-op unless ``parallelism_config.cp_size > 1`` (the backend applies it).
        """
        return self.backend.context_parallel(buffers, buffer_seq_dims, no_restore_buffers)

    # -- synchronisation ----------------------------------------------------
    def wait_for_everyone(self) -> None:
        """Barrier across processes (after this process's pending asynchronous checkpoint writes)."""
        self.checkpoints.async_writer.wait()
        self.backend.wait_for_everyone()

    # -- prepare ------------------------------------------------------------
    def prepare(self, *args: object, device_placement: list[bool] | None = None) -> Any:
        """Prepare any number of models, optimizers, data loaders and schedulers, in any order.

        ``Any``: what comes back depends on the objects and the backend (a wrapped model, an
        :class:`~accel.optimizer.AcceleratedOptimizer`, a prepared loader, ...), one or a tuple.

        Returns them in the same order (a single object when one is passed). An object
        prepared before (or the prepared object itself) is returned as it was prepared.
        """
        if device_placement is None:
            device_placement = [self.device_placement] * len(args)
        elif len(device_placement) != len(args):
            raise ValueError(
                f"device_placement has {len(device_placement)} entries for {len(args)} objects"
            )
        result = [self.prepared.lookup(obj) for obj in args]
        new = [i for i, done in enumerate(result) if done is None]
        if new:
            self._check_devices(args)
            objects = self.precision.prepare([args[i] for i in new])
            made = self.backend.prepare(objects, [device_placement[i] for i in new])
            for i, obj in zip(new, made):
                self.prepared.track(obj, original=args[i])
                self.throughput.watch(obj)
                result[i] = obj
        return result[0] if len(result) == 1 else tuple(result)

    def _check_devices(self, objects: tuple[object, ...]) -> None:
        for obj in objects:
            if (
                isinstance(obj, torch.nn.Module)
                and getattr(obj, "hf_device_map", None)
                and self.use_distributed
            ):
                raise ValueError(
                    "this model was dispatched over several devices with a device_map; it cannot also be "
                    "trained with data parallelism. Load it on one device per process instead"
                )

    def prepare_model(
        self,
        model: torch.nn.Module,
        device_placement: bool | None = None,
        evaluation_mode: bool = False,
    ) -> torch.nn.Module:
        """Prepare one model (``evaluation_mode`` for inference-only use)."""
        placement = self.device_placement if device_placement is None else device_placement
        if not evaluation_mode or self.prepared.lookup(model) is not None:
            return self.prepare(model, device_placement=[placement])
        prepared = self.backend.prepare_model(model, placement, evaluation_mode)
        self.prepared.track(prepared, original=model)
        return prepared

    def prepare_optimizer(
        self, optimizer: torch.optim.Optimizer, device_placement: bool | None = None
    ) -> AcceleratedOptimizer:
        """Prepare one optimizer."""
        return self.prepare(
            optimizer,
            device_placement=[
                self.device_placement if device_placement is None else device_placement
            ],
        )

    def prepare_data_loader(
        self, data_loader: torch.utils.data.DataLoader, device_placement: bool | None = None
    ) -> torch.utils.data.DataLoader:
        """Prepare one data loader."""
        return self.prepare(
            data_loader,
            device_placement=[
                self.device_placement if device_placement is None else device_placement
            ],
        )

    def prepare_scheduler(self, scheduler: object) -> AcceleratedScheduler:
        """Prepare one learning-rate scheduler (after its optimizer)."""
        return self.prepare(scheduler)

    # -- training step ------------------------------------------------------
    def train_step(
        self,
        step: Callable[[B], torch.Tensor],
        batch: B,
        *models: torch.nn.Module,
        count_items: Callable[[B], int | torch.Tensor] | None = None,
        reduction: str = "mean",
        num_items_in_batch: int | torch.Tensor | None = None,
    ) -> torch.Tensor | None:
        """Run ``step(batch)`` (forward, loss, ``accelerator.backward``), splitting the batch on out-of-memory.

        On an out-of-memory error on any process, every process drops the attempt's gradients
        and runs the same batch again in twice as many micro-batches; the split is kept for the
        next steps (:attr:`micro_batching`). Gradients are reduced once per synchronising step,
        after every process agreed that all micro-batches fitted. Each micro-batch's loss is
        weighted so that the gradient is the whole batch's: ``reduction="mean"`` (the step
        returns the mean over its samples) by its share of samples; with ``count_items`` (a
        function counting the items, e.g. tokens, a micro-batch's mean loss averages over) by
        its items over the items of the whole batch on every process (or over
        ``num_items_in_batch``, the items of the whole optimizer step on every process, to be exact
        across accumulation steps as well); ``reduction="sum"`` (losses
        that add up, e.g. divided by transformers' ``num_items_in_batch``) not at all. ``models``:
        the models the step trains (default: every prepared model). Returns the weighted sum of
        the step's returned losses (the whole batch's), detached; None when the step returns no
        tensor. The optimizer steps outside.
        """
        models = models or tuple(self.prepared.models)
        if not models:
            raise UsageError(
                "train_step needs the models the step trains: prepare them first or pass them "
                "(accelerator.train_step(step, batch, model))"
            )
        return self.micro_batching.run(
            step, batch, models, count_items, reduction, num_items_in_batch, backend=self.backend
        )

    def backward(
        self, loss: torch.Tensor, *, learning_rate: float | None = None, **kwargs: object
    ) -> None:
        """``loss.backward()`` with loss scaling and division by the accumulation steps.

        ``learning_rate=`` is for LOMO / AdaLomo optimizers (``lomo-optim``), which update the
        weights during the backward pass: their ``fused_backward(loss, learning_rate)`` runs
        instead. With other optimizers it is ignored.
        """
        if self.checkpoints.async_writer.failed:  # an asynchronous save failed: say so now
            self.checkpoints.async_writer.raise_if_failed()
        steps = self.gradient_state.plugin_kwargs.get("num_steps", 1)
        if steps > 1 and self._divide_loss:
            loss = loss / steps
        batching = getattr(
            self, "micro_batching", None
        )  # absent on an object made without __init__
        if batching is not None and batching.running:  # in train_step: agree, then weight
            loss = batching.before_backward(loss)
        if learning_rate is not None and fused_backward(self._optimizers, loss, learning_rate):
            return
        if self._backward_precision is not self.backend_context.precision:
            self._resolve_backward()  # the precision was set (before prepare)
        backward = self._backward_impl  # decided once per (backend, precision) pair
        if backward is None:  # neither the backend nor the precision changes Tensor.backward
            loss.backward(**kwargs) if kwargs else loss.backward()
        else:
            backward(loss, **kwargs)

    def _resolve_backward(self) -> None:
        """Decide which ``backward`` :meth:`backward` calls, once per (backend, precision) pair."""
        backend = vars(self).get("_backend")
        context = vars(self).get("backend_context")
        precision = self._backward_precision = None if context is None else context.precision
        if backend is not None and getattr(type(backend), "backward", Backend.backward) is not (
            Backend.backward
        ):
            self._backward_impl: Callable | None = backend.backward
        elif precision is not None and type(precision).backward is not Precision.backward:
            self._backward_impl = precision.backward
        else:
            self._backward_impl = None

    def _set_backend(self, backend: Backend) -> None:
        self._backend = backend
        # Decided once too: whether accumulate may skip models without a ``no_sync`` (without
        # touching the backend and its classes on every accumulating micro-batch).
        self._base_no_sync = getattr(type(backend), "no_sync", Backend.no_sync) is Backend.no_sync
        # Whether backward divides the loss by the accumulation steps, or the backend does.
        self._divide_loss = not getattr(type(backend), "scales_loss_for_accumulation", False)
        self._resolve_backward()

    def _set_precision(self, precision: Precision) -> None:
        self.backend_context.precision = precision  # refused there once anything is prepared
        self._resolve_backward()

    backend = property(
        operator.attrgetter("_backend"),  # a C-level getter: no Python frame per read
        _set_backend,
        doc="The :class:`~accel.backends.Backend` of this run (chosen by the connector).",
    )
    precision = property(
        operator.attrgetter("backend_context.precision"),
        _set_precision,
        doc="The :class:`~accel.precision.Precision` of this run, kept by :attr:`backend_context` "
        "(a backend may replace it at set-up; setting it after prepare() raises RuntimeError).",
    )
    _backward_impl: Callable | None = None
    _backward_precision: Precision | None = None
    micro_batching: MicroBatching
    _base_no_sync = False
    _divide_loss = True

    def accumulate(self, *models: torch.nn.Module) -> contextlib.AbstractContextManager:
        """Wrap one micro-batch: gradients are synchronised and the optimizer steps every N calls.

        The micro-batch is counted when ``accumulate`` is called (in ``with
        accelerator.accumulate(model):``, as the block starts). On accumulating steps each
        model runs under the backend's ``no_sync``; elsewhere the block runs as is.
        """
        state = self.gradient_state  # inline: this runs every micro-batch
        options = state.plugin_kwargs
        loader = state.active_dataloader
        if (
            options.get("sync_with_dataloader", True)
            and loader is not None
            and loader.end_of_dataloader
        ):
            self.step = 0
            state.sync_gradients = True
            return _NO_CONTEXT
        self.step = step = self.step + 1
        steps = options.get("num_steps", 1)
        if steps == 1 or step % steps == 0:
            state.sync_gradients = True
            return _NO_CONTEXT
        state.sync_gradients = False
        if options.get("sync_each_batch", False) or not models:
            return _NO_CONTEXT
        if len(models) == 1 and self._base_no_sync:  # the usual case, decided without a call
            model = models[0]
            if not (  # the base no_sync does nothing without a model's own no_sync
                callable(getattr(type(model), "no_sync", None)) or "no_sync" in vars(model)
            ):
                return _NO_CONTEXT
            return self.backend.no_sync(model)
        if len(models) == 1:
            return self.backend.no_sync(models[0])
        return _no_sync_all(self.backend, models, self._base_no_sync)

    @contextlib.contextmanager
    def no_sync(self, model: torch.nn.Module) -> Generator[None, None, None]:
        """Gradients computed inside are not synchronised across processes."""
        with self.backend.no_sync(model):
            yield

    @contextlib.contextmanager
    def trigger_sync_in_backward(self, model: torch.nn.Module) -> Generator[None, None, None]:
        """Synchronise gradients in the next backward of ``model``, after forwards under :meth:`no_sync`.

        The backward run inside averages across processes the gradients accumulated by every
        backward since the last synchronisation (as with Accelerate); outside distributed
        training it does nothing::

            with accelerator.no_sync(model):
                loss_a = loss_fn(model(input_a))
                loss_b = loss_fn(model(input_b))
            accelerator.backward(loss_a)  # accumulates locally
            with accelerator.trigger_sync_in_backward(model):
                accelerator.backward(loss_b)  # all-reduces the accumulated gradients
        """
        with self.backend.trigger_sync_in_backward(model):
            yield

    @contextlib.contextmanager
    def autocast(
        self, autocast_handler: AutocastKwargs | None = None
    ) -> Generator[None, None, None]:
        """Run the block under this Accelerator's mixed precision."""
        with self.precision.autocast(autocast_handler):
            yield

    def join_uneven_inputs(
        self,
        joinables: list[torch.nn.Module | torch.optim.Optimizer],
        even_batches: bool | None = None,
    ) -> contextlib.AbstractContextManager:
        """Train with uneven inputs across processes (the DDP backend joins; elsewhere a no-op)."""
        return self.backend.join_uneven_inputs(joinables, even_batches)

    def unscale_gradients(
        self, optimizer: torch.optim.Optimizer | list[torch.optim.Optimizer] | None = None
    ) -> None:
        """Unscale fp16 gradients of ``optimizer`` (all prepared ones by default)."""
        optimizers = (
            self.prepared.optimizers
            if optimizer is None
            else (optimizer if isinstance(optimizer, (list, tuple)) else [optimizer])
        )
        for opt in optimizers:
            self.precision.unscale_(getattr(opt, "optimizer", opt))

    def clip_grad_norm_(
        self, parameters: Iterable[torch.Tensor], max_norm: float, norm_type: float = 2.0
    ) -> torch.Tensor | None:
        """Unscale then clip gradients by total norm; returns the norm."""
        parameters = list(parameters)
        self._unscale_for(parameters)
        return self.backend.clip_grad_norm_(parameters, max_norm, norm_type=norm_type)

    def clip_grad_value_(self, parameters: Iterable[torch.Tensor], clip_value: float) -> None:
        """Unscale then clip each gradient element to ``[-clip_value, clip_value]``."""
        parameters = list(parameters)
        self._unscale_for(parameters)
        self.backend.clip_grad_value_(parameters, clip_value)

    def _unscale_for(self, parameters: list[torch.Tensor]) -> None:
        if self.precision.scaler is None or not self.sync_gradients:
            return
        ids = {id(p) for p in parameters}
        for opt in self.prepared.optimizers:
            inner = getattr(opt, "optimizer", opt)
            if any(id(p) in ids for group in inner.param_groups for p in group["params"]):
                self.precision.unscale_(inner)

    # -- collectives ----------------------------------------------------------
    def gather(self, tensor: T) -> T:
        """Concatenate ``tensor`` (nested) from every process."""
        return self.backend.gather(tensor)

    def gather_for_metrics(self, input_data: T, use_gather_object: bool = False) -> T:
        """Gather evaluation outputs from every process, each sample exactly once.

        The samples a prepared data loader added to even out its last round are
        dropped; with ``even_batches=False`` batches of different sizes are gathered
        as they are. Non-tensor data (or ``use_gather_object``) goes through the backend's
        :meth:`~accel.backends.Backend.gather_object`, uneven tensors through its
        :meth:`~accel.backends.Backend.gather_uneven`, so that the three paths run over the
        same processes (the data-parallel ones under N-D parallelism).
        """
        objects = use_gather_object or not is_tensor_structure(input_data)
        if objects:
            data = self.backend.gather_object(input_data)
        elif self.even_batches:
            data = self.backend.gather(input_data)
        else:
            data = self.backend.gather_uneven(input_data)
        remainder = self.gradient_state.remainder
        if not (self.gradient_state.end_of_dataloader and remainder > 0):
            return data
        if objects:  # one list of every process's objects (of tensors, too, with use_gather_object)
            return data[:remainder]
        # The slice keeps every leaf's type, so the structure is still a T.
        return cast("T", recursively_apply(lambda t: t[:remainder], data))

    def reduce(self, tensor: T, reduction: str = "sum", scale: float = 1.0) -> T:
        """All-reduce ``tensor`` (``sum`` or ``mean``)."""
        return self.backend.reduce(tensor, reduction, scale)

    def pad_across_processes(
        self, tensor: T, dim: int = 0, pad_index: int = 0, pad_first: bool = False
    ) -> T:
        """Pad to the largest size across processes along ``dim``."""
        return pad_across_processes(tensor, dim=dim, pad_index=pad_index, pad_first=pad_first)

    def set_trigger(self) -> None:
        """Raise a flag on this process, seen by every process at the next :meth:`check_trigger`."""
        self.flag_tensor = torch.tensor(1, device=self.device)

    def check_trigger(self) -> bool:
        """True on every process if any process called :meth:`set_trigger` since the last check."""
        flag = (
            self.flag_tensor
            if self.flag_tensor is not None
            else torch.tensor(0, device=self.device)
        )
        if self.backend.reduce(flag, "sum").item() >= 1:
            self.flag_tensor = torch.tensor(0, device=self.device)
            return True
        return False

    # -- models (saving and resuming: accel.accelerator_checkpointing.CheckpointingMixin) --
    def deepspeed_ulysses_dl_adapter(self, dl: T, model: torch.nn.Module) -> T:
        """``dl`` cut to this rank's sequence slice under DeepSpeed sequence parallelism, else ``dl``."""
        return self.backend.deepspeed_ulysses_dl_adapter(dl, model)

    def unwrap_model(
        self,
        model: torch.nn.Module,
        keep_fp32_wrapper: bool = True,
        keep_torch_compile: bool = True,
    ) -> torch.nn.Module:
        """Remove the wrappers accel added (DDP-like ``.module``, compilation, precision): the
        backend's :meth:`~accel.backends.Backend.unwrap_model`."""
        return self.backend.unwrap_model(model, keep_fp32_wrapper, keep_torch_compile)

    def get_state_dict(
        self, model: torch.nn.Module, unwrap: bool = True
    ) -> dict[str, torch.Tensor]:
        """A full state dict of ``model`` (gathered if it is sharded): the backend's
        :meth:`~accel.backends.Backend.get_state_dict`."""
        return self.backend.get_state_dict(model, unwrap)

    # -- trackers and profiling (the tracker manager's) ---------------------------
    def init_trackers(
        self,
        project_name: str,
        config: dict[str, Any] | None = None,
        init_kwargs: dict[str, dict] | None = None,
    ) -> None:
        """Start every tracker of ``log_with`` for ``project_name`` and store ``config``."""
        self.tracking.init_trackers(project_name, config, init_kwargs)

    def get_tracker(self, name: str, unwrap: bool = False) -> Any:
        """The tracker called ``name`` (its run object with ``unwrap``); a no-op tracker elsewhere.

        ``Any``: with ``unwrap`` it is the tracking library's own run object."""
        return self.tracking.get_tracker(name, unwrap)

    def log(
        self,
        values: dict[str, Any],
        step: int | None = None,
        log_kwargs: dict[str, dict] | None = None,
    ) -> None:
        """Log ``values`` at ``step`` to every tracker."""
        self.tracking.log(values, step, log_kwargs)

    @property
    def trackers(self) -> list[GeneralTracker]:
        """The started trackers (only those that run on this process)."""
        return self.tracking.trackers

    @trackers.setter
    def trackers(self, value: list[GeneralTracker]) -> None:
        self.tracking.trackers = value

    @property
    def log_with(self) -> LogWith:
        """What ``log_with`` was given (tracker names, ``"all"``, tracker instances)."""
        return self.tracking.log_with

    @log_with.setter
    def log_with(self, value: LogWith) -> None:
        self.tracking.log_with = value

    def end_training(self) -> None:
        """Finish every tracker, wait for pending checkpoint writes, and wait for all processes."""
        self.tracking.finish()
        self.wait_for_everyone()

    def profile(
        self, profile_handler: KwargsHandler | None = None
    ) -> contextlib.AbstractContextManager:
        """A context manager profiling the block (needs a profiler plugin such as accel-profiler)."""
        from accel.plugins import hook

        handler = profile_handler or self.handlers.get("ProfileKwargs")
        context = hook().accel_profile(run=RunView.of(self), profile_kwargs=handler)
        if context is None:
            raise MissingPluginError("accelerator.profile()", "accel-profiler")
        return context

    # -- Accelerate's private names, kept for user code that reads (or replaces) them --
    @property
    def _models(self) -> list[torch.nn.Module]:
        """``prepared.models``."""
        return self.prepared.models

    @_models.setter
    def _models(self, value: list[torch.nn.Module]) -> None:
        self.prepared.models = value

    @property
    def _optimizers(self) -> list[torch.optim.Optimizer]:
        """``prepared.optimizers``."""
        return self.prepared.optimizers

    @_optimizers.setter
    def _optimizers(self, value: list[torch.optim.Optimizer]) -> None:
        self.prepared.optimizers = value

    @property
    def _schedulers(self) -> list[AcceleratedScheduler]:
        """``prepared.schedulers``."""
        return self.prepared.schedulers

    @_schedulers.setter
    def _schedulers(self, value: list[AcceleratedScheduler]) -> None:
        self.prepared.schedulers = value

    @property
    def _dataloaders(self) -> list[object]:
        """``prepared.dataloaders``."""
        return self.prepared.dataloaders

    @_dataloaders.setter
    def _dataloaders(self, value: list[object]) -> None:
        self.prepared.dataloaders = value

    @property
    def _custom_objects(self) -> list[object]:
        """``prepared.custom_objects``."""
        return self.prepared.custom_objects

    @_custom_objects.setter
    def _custom_objects(self, value: list[object]) -> None:
        self.prepared.custom_objects = value

    # -- memory --------------------------------------------------------------
    def free_memory(self, *objects: object) -> list[None]:
        """Drop every reference the Accelerator holds, then release ``objects``."""
        from accel.memory import release_memory

        self.prepared.clear()
        self.step = 0
        return release_memory(*objects)

    def clear(self, *objects: object) -> list[None]:
        """Alias of :meth:`free_memory`."""
        return self.free_memory(*objects)

    def release_memory(self, *objects: object) -> list[None]:
        """Release ``objects`` and clear the device cache."""
        from accel.memory import release_memory

        return release_memory(*objects)

    def verify_device_map(self, model: torch.nn.Module) -> bool:
        """Whether ``model`` was dispatched with a multi-device ``device_map``."""
        device_map = getattr(model, "hf_device_map", None)
        return bool(device_map) and len(set(device_map.values())) > 1

    def __repr__(self) -> str:
        return f"Accelerator(distributed_type={self.distributed_type}, device={self.device}, mixed_precision={self.mixed_precision}, num_processes={self.num_processes})"
