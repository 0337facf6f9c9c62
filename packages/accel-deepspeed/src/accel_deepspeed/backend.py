"""The DeepSpeed backend: ``prepare`` turns each model (+ optimizer, scheduler) into a DeepSpeed engine.

Each prepared model gets its own engine, built from its own copy of the plugin's
config with the ``"auto"`` values filled for it (:mod:`accel_deepspeed.auto`);
nothing process-global selects a "current" engine. Backward, the optimizer step,
clipping and checkpoints go through the engine.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import torch
from accel.backends import Backend
from accel.distributed.process import ensure_process_group, plugin_object
from accel.errors import CheckpointError, ConfigError, ResumeError
from accel.precision import Precision

from .auto import AutoContext, Filled, fill_auto
from .config import DeepSpeedPlugin
from .dummy import DummyOptim, DummyScheduler
from .hf_config import DeepSpeedConfig
from .locks import check_extension_locks
from .sequence_parallel import (
    SequenceParallelLayout,
    SequenceSlicingCollate,
    check_layout,
    fixed_sequence_length,
    initialize_groups,
    is_transformers_model,
    register_attention,
    slice_loader,
    sp_options,
)
from .wrappers import DeepSpeedEngineWrapper, DeepSpeedOptimizerWrapper, DeepSpeedSchedulerWrapper

if TYPE_CHECKING:
    from deepspeed.runtime.engine import DeepSpeedEngine

LoaderT = TypeVar("LoaderT", bound="torch.utils.data.DataLoader")

MODEL_NAME = "pytorch_model"
"""Checkpoint tag of model 0 (model ``i`` > 0: ``pytorch_model_i``), as in Accelerate."""


def checkpoint_tag(index: int) -> str:
    """The DeepSpeed checkpoint tag of model ``index`` inside a ``save_state`` folder."""
    return MODEL_NAME if index == 0 else f"{MODEL_NAME}_{index}"


_ZERO_FILE = re.compile(r"zero_pp_rank_(\d+)_mp_rank_\d+_optim_states\.pt$")


def zero_partitions(tag_dir: Path) -> int:
    """How many data-parallel ranks wrote the ZeRO optimizer partitions in ``tag_dir`` (0: none)."""
    found = (_ZERO_FILE.search(p.name) for p in tag_dir.glob("*zero_pp_rank_*_optim_states.pt"))
    return len({match.group(1) for match in found if match})


def resharded_tag(engine: DeepSpeedEngine, folder: Path, tag: str) -> str:
    """The tag to load: ``tag``, or its universal conversion when the data-parallel size changed.

    A ZeRO checkpoint holds one optimizer partition per data-parallel rank and DeepSpeed loads
    it only on as many ranks. Written by another number, it loads through DeepSpeed's
    universal checkpoint (``tag_universal``, with ``checkpoint.load_universal`` set in the
    DeepSpeed config); without one, :class:`~accel.errors.ResumeError` names the command
    that converts it.
    """
    saved = zero_partitions(folder / tag)
    now = int(getattr(engine, "dp_world_size", 1) or 1)
    if not saved or saved == now:
        return tag
    universal = folder / f"{tag}_universal"
    if engine.load_universal_checkpoint() and universal.is_dir():
        return universal.name
    raise ResumeError(
        f"the DeepSpeed ZeRO checkpoint {folder / tag} was written by {saved} data-parallel "
        f"processes and this run has {now}: convert it once with `python -m "
        f"deepspeed.checkpoint.ds_to_universal --input_folder {folder / tag} --output_folder "
        f'{universal}` and set "checkpoint": {{"load_universal": true}} in the DeepSpeed '
        "config, or resume on the same number of processes"
    )


def _is_scheduler(obj: object) -> bool:
    return isinstance(obj, (torch.optim.lr_scheduler.LRScheduler, DummyScheduler)) or (
        hasattr(obj, "step")
        and hasattr(obj, "optimizer")
        and hasattr(obj, "state_dict")
        and not isinstance(obj, torch.optim.Optimizer)
    )


def core_leaves_loss_scaling_to_backends() -> bool:
    """Whether accel-core's ``Accelerator.backward`` skips dividing the loss by the accumulation
    steps for a backend whose ``scales_loss_for_accumulation`` is True (then the engine divides)."""
    return hasattr(Backend, "scales_loss_for_accumulation")


class EnginePrecision(Precision):
    """The run's precision as DeepSpeed runs it: the engine casts the model and scales the loss
    itself, so no autocast and no GradScaler here; the name and the fields (``dtype``, ``fp8``)
    stay the chosen precision's, for the config's ``fp16`` / ``bf16`` sections."""

    def __init__(self, chosen: Precision):
        super().__init__(chosen.name, chosen.device, chosen.handlers)
        self.dtype = chosen.dtype
        self.fp8 = chosen.fp8


class DeepSpeedBackend(Backend):
    """DeepSpeed ZeRO 0-3 with CPU/NVMe offload; one engine per prepared model."""

    name = "deepspeed"
    distributed_types = ("DEEPSPEED",)
    scales_loss_for_accumulation = True
    """The engine divides the loss by its ``gradient_accumulation_steps`` (unless
    ``accelerator.backward(loss, scale_wrt_gas=False)``), as in Accelerate."""

    @property
    def micro_batching_refusal(self) -> str | None:
        """DeepSpeed runs its own micro-batches: ``train_step`` is refused."""
        return (
            "train_step (automatic micro-batching) is not available with DeepSpeed: its engine fixes "
            "the micro-batch at initialisation; set train_micro_batch_size_per_gpu and "
            "gradient_accumulation_steps in the DeepSpeed config instead"
        )

    def setup(self) -> Precision:
        """Read the plugin and set up the groups; returns the plain precision (DeepSpeed runs its own)."""
        run = self.context
        if run.device.type == "cpu":
            os.environ.setdefault("DS_ACCELERATOR", "cpu")
        # before DeepSpeed JIT-builds its ops: a lock left by a killed build would block forever
        check_extension_locks()
        self.plugin: DeepSpeedPlugin = plugin_object(run, "deepspeed_plugin", DeepSpeedPlugin)
        self.plugin.select(_from_accelerator_state=True)
        self.plugin.attach(run)  # ZeRO-3 init reads the run's mixed precision from the context
        self._steps_source = "Accelerator(gradient_accumulation_steps=...)"
        ensure_process_group()  # one process: DeepSpeed still needs a (trivial) group
        # DeepSpeed reads these even when the process group exists (set by every launcher)
        os.environ.setdefault("LOCAL_RANK", str(run.local_process_index))
        os.environ.setdefault("RANK", str(run.process_index))
        os.environ.setdefault("WORLD_SIZE", str(run.num_processes))
        self.engines: list[DeepSpeedEngine] = []
        self.filled: list[list[Filled]] = []
        """Per engine, the ``"auto"`` values filled and where each came from."""
        self._micro_batch: tuple[int, str] | None = None
        self._last_forward: list[DeepSpeedEngine] = []
        self._warned_clip = False
        self.sequence_parallel: SequenceParallelLayout | None = self._sequence_parallel_layout()
        """Where this process sits in DeepSpeed's sequence-parallel groups (``sp_size > 1``), else None."""
        self.mpu: object = None
        """DeepSpeed's sequence-parallel groups given to ``deepspeed.initialize`` (None without SP)."""
        return EnginePrecision(run.precision)

    def gradient_accumulation_steps(self, requested: int) -> int:
        """The DeepSpeed config's steps when the Accelerator asks for 1; otherwise both must agree."""
        steps = self.plugin.get_value("gradient_accumulation_steps")
        if not isinstance(steps, int):
            return requested
        if requested == 1:
            self._steps_source = "the DeepSpeed config / plugin"
            return steps
        if requested != steps:
            raise ConfigError(
                f"gradient_accumulation_steps is {steps} in the DeepSpeed config but "
                f"{requested} in the Accelerator: set it in one place "
                "(or write auto in the DeepSpeed config)"
            )
        return requested

    def _sequence_parallel_layout(self) -> SequenceParallelLayout | None:
        run = self.context
        config = run.parallelism_config
        if config is None:
            return None
        if config.sp_size == 1:
            if config.tp_size > 1 or config.cp_size > 1:
                raise ConfigError(
                    f"ParallelismConfig(tp_size={config.tp_size}, cp_size={config.cp_size}) is applied "
                    "by the FSDP plugin, not DeepSpeed: launch without --use_deepspeed, or use "
                    "DeepSpeed's AutoTP (tensor_parallel.autotp_size in the DeepSpeed config)"
                )
            return None
        if run.dataloader_config.dispatch_batches:
            raise ConfigError(
                "DeepSpeed sequence parallelism cuts every batch on each process: "
                "dispatch_batches=True is not supported with sp_size > 1"
            )
        return check_layout(
            config, run.num_processes, run.process_index, self.plugin.deepspeed_config
        )

    def data_parallel_shard(self) -> tuple[int, int]:
        """With sequence parallelism, loaders shard over ``world / sp_size``: an SP group reads one batch."""
        if self.sequence_parallel is None:
            return super().data_parallel_shard()
        return self.sequence_parallel.dp_size, self.sequence_parallel.dp_rank

    def prepare_data_loader(
        self, dataloader: torch.utils.data.DataLoader, device_placement: bool = True
    ) -> torch.utils.data.DataLoader:
        """The usual prepared loader; with sequence parallelism each batch is cut to this rank's slice."""
        loader = super().prepare_data_loader(dataloader, device_placement)
        layout = self.sequence_parallel
        if layout is not None:
            fixed = fixed_sequence_length(self.context.parallelism_config)
            loader.collate_fn = SequenceSlicingCollate(
                loader.collate_fn, layout.sp_rank, layout.sp_size, fixed
            )
        return loader

    def deepspeed_ulysses_dl_adapter(self, dataloader: LoaderT, model: object = None) -> LoaderT:
        """The loader cutting each batch to this rank's sequence slice (see
        :func:`accel_deepspeed.sequence_parallel.ulysses_dl_adapter`); unchanged without SP."""
        return slice_loader(self.sequence_parallel, self.context.parallelism_config, dataloader)

    # -- prepare ----------------------------------------------------------------
    def prepare(self, objects: list[object], device_placement: list[bool]) -> list[object]:
        """Data loaders as usual; each model with the optimizer and scheduler after it into one engine."""
        result: list[object] = list(objects)
        for index, obj in enumerate(objects):
            if isinstance(obj, torch.utils.data.DataLoader):
                self._note_batch_size(obj)
                result[index] = self.prepare_data_loader(obj, device_placement[index])
        models = [i for i, o in enumerate(objects) if isinstance(o, torch.nn.Module)]
        optimizers = [
            i for i, o in enumerate(objects) if isinstance(o, (torch.optim.Optimizer, DummyOptim))
        ]
        schedulers = [
            i
            for i, o in enumerate(objects)
            if i not in models and i not in optimizers and _is_scheduler(o)
        ]
        if len(optimizers) > len(models) or len(schedulers) > len(optimizers):
            raise ValueError(
                "with DeepSpeed, pass each model together with its optimizer (and scheduler) to one "
                "accelerator.prepare() call: the engine is built from all of them at once"
            )
        for n, model_index in enumerate(models):
            opt_index = optimizers[n] if n < len(optimizers) else None
            sched_index = schedulers[n] if n < len(schedulers) else None
            # the indices were chosen by isinstance above
            engine, optimizer, scheduler = self._build_engine(
                cast("torch.nn.Module", objects[model_index]),
                cast("torch.optim.Optimizer | DummyOptim", objects[opt_index])
                if opt_index is not None
                else None,
                objects[sched_index] if sched_index is not None else None,
            )
            result[model_index] = engine
            if opt_index is not None:
                result[opt_index] = optimizer
            if sched_index is not None:
                result[sched_index] = scheduler
        return result

    def _note_batch_size(self, loader: torch.utils.data.DataLoader) -> None:
        size = loader.batch_size
        if size is None:
            size = getattr(loader.batch_sampler, "batch_size", None)
        if not isinstance(size, int) or self._micro_batch is not None:
            return
        if self.context.split_batches:
            shards = self.data_parallel_shard()[0]
            self._micro_batch = (
                size // shards,
                f"the data loader's batch_size {size} / {shards} data-parallel processes (split_batches)",
            )
        else:
            self._micro_batch = (size, f"the data loader's batch_size {size}")

    def _context(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer | DummyOptim | None,
        scheduler: object,
    ) -> AutoContext:
        run, plugin = self.context, self.plugin
        ctx = AutoContext(
            num_processes=self.data_parallel_shard()[0],
            gradient_accumulation_steps=run.gradient_accumulation_steps,
            gradient_accumulation_source=f"the Accelerator's gradient_accumulation_steps ({self._steps_source})",
            precision=run.precision,
            gradient_clipping=plugin.gradient_clipping
            if isinstance(plugin.gradient_clipping, float)
            else None,
            zero3_save_16bit_model=bool(plugin.zero3_save_16bit_model),
        )
        if self._micro_batch is not None:
            ctx.micro_batch_size, ctx.micro_batch_source = self._micro_batch
        if isinstance(optimizer, DummyOptim):
            ctx.optimizer_values = {"lr": optimizer.lr, "weight_decay": optimizer.weight_decay}
            ctx.optimizer_source = "DummyOptim"
        elif optimizer is not None:
            group = optimizer.param_groups[0]
            ctx.optimizer_values = {
                k: list(group[k]) if k == "betas" else group[k]
                for k in ("lr", "weight_decay", "betas", "eps")
                if k in group
            }
            ctx.optimizer_source = f"{type(optimizer).__name__}.param_groups[0]"
        if isinstance(scheduler, DummyScheduler):
            ctx.total_num_steps = scheduler.total_num_steps
            ctx.warmup_num_steps = scheduler.warmup_num_steps
            ctx.scheduler_source = "DummyScheduler"
        config = getattr(model, "config", None)
        hidden = getattr(config, "hidden_size", None)
        sizes = getattr(config, "hidden_sizes", None)
        if hidden is None and sizes:
            hidden, ctx.hidden_size_source = (
                max(sizes),
                "max(model.config.hidden_sizes)",
            )
        elif hidden is not None:
            ctx.hidden_size_source = "model.config.hidden_size"
        ctx.hidden_size = hidden if isinstance(hidden, int) else None
        return ctx

    def _check_pairing(self, optimizer: object, scheduler: object) -> None:
        config = self.plugin.deepspeed_config
        if (
            "optimizer" in config
            and optimizer is not None
            and not isinstance(optimizer, DummyOptim)
        ):
            raise ConfigError(
                "the DeepSpeed config has an optimizer section and a torch optimizer was passed too: "
                "pass accel.utils.DummyOptim(model.parameters()) instead, or remove the optimizer section"
            )
        if isinstance(optimizer, DummyOptim) and "optimizer" not in config:
            raise ConfigError(
                "DummyOptim stands for the optimizer of the DeepSpeed config, which has no optimizer "
                "section: add one, or pass a torch optimizer"
            )
        if (
            "scheduler" in config
            and scheduler is not None
            and not isinstance(scheduler, DummyScheduler)
        ):
            raise ConfigError(
                "the DeepSpeed config has a scheduler section and a torch scheduler was passed too: "
                "pass accel.utils.DummyScheduler(optimizer, ...) instead, or remove the scheduler section"
            )
        if (
            isinstance(scheduler, DummyScheduler)
            and "scheduler" not in config
            and scheduler.lr_scheduler_callable is None
        ):
            raise ConfigError(
                "DummyScheduler stands for the scheduler of the DeepSpeed config, which has no "
                "scheduler section: add one, give DummyScheduler(lr_scheduler_callable=...), or pass "
                "a torch scheduler"
            )

    def _build_engine(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer | DummyOptim | None,
        scheduler: object,
    ) -> tuple[DeepSpeedEngine, DeepSpeedOptimizerWrapper | None, DeepSpeedSchedulerWrapper | None]:
        import deepspeed

        self._check_pairing(optimizer, scheduler)
        config, filled = fill_auto(
            self.plugin.deepspeed_config, self._context(model, optimizer, scheduler)
        )
        self.plugin.set_moe_leaf_modules(model)
        # Any: deepspeed.initialize's hints are narrower than what it takes (model_parameters
        # is hinted a Module and receives parameter groups, lr_scheduler a torch scheduler)
        kwargs: dict[str, Any] = {"model": model, "config": config}
        if self.sequence_parallel is not None:
            kwargs["mpu"] = self._sequence_parallel_mpu(model, config)
        if isinstance(optimizer, DummyOptim):
            kwargs["model_parameters"] = optimizer.params
        elif optimizer is not None:
            kwargs["optimizer"] = self._offload_ready(optimizer, config)
        if isinstance(scheduler, DummyScheduler):
            if "scheduler" not in config:
                kwargs["lr_scheduler"] = scheduler.lr_scheduler_callable
        elif scheduler is not None:
            kwargs["lr_scheduler"] = scheduler
        with self._scalar_parameters_broadcast(model, config):
            engine, ds_optimizer, _, ds_scheduler = deepspeed.initialize(**kwargs)
        engine.register_forward_pre_hook(self._record_forward)
        # preparing the same module again (Trainer(auto_find_batch_size=True) after an out-of-memory
        # error, a second train()): the new engine replaces the old one
        for index in reversed(range(len(self.engines))):
            if self.engines[index].module is engine.module:
                old = self.engines.pop(index)
                self.filled.pop(index)
                if old in self._last_forward:
                    self._last_forward.remove(old)
        self.engines.append(engine)
        self.filled.append(filled)
        wrapped_optimizer = (
            DeepSpeedOptimizerWrapper(ds_optimizer)
            if optimizer is not None and ds_optimizer is not None
            else None
        )
        wrapped_scheduler = (
            DeepSpeedSchedulerWrapper(ds_scheduler, [wrapped_optimizer])
            if scheduler is not None and ds_scheduler is not None
            else None
        )
        return engine, wrapped_optimizer, wrapped_scheduler

    @contextlib.contextmanager
    def _scalar_parameters_broadcast(
        self, model: torch.nn.Module, config: DeepSpeedConfig
    ) -> Generator[None, None, None]:
        """Let ``deepspeed.initialize`` take a model with zero-dimensional parameters (ZeRO 0-2).

        DeepSpeed (0.19) broadcasts every parameter from rank 0 as a byte view, which a
        0-dim tensor cannot give ("self.dim() cannot be 0 to view Float as Byte"). Those
        parameters are broadcast here instead, and marked for the duration of
        ``initialize`` with the attribute DeepSpeed's own broadcast skips.
        """
        scalars = [
            (name, p)
            for name, p in model.named_parameters()
            if p.dim() == 0 and not hasattr(p, "ds_optim_param") and not hasattr(p, "ds_id")
        ]
        if not scalars:
            yield
            return
        stage = config.get("zero_optimization", {}).get("stage", 0)
        names = ", ".join(name for name, _ in scalars)
        fix = "give them shape (1,) (torch.nn.Parameter(torch.tensor([value]))) or use ZeRO stage 1 or 2"
        if stage == 3:
            raise ConfigError(
                f"DeepSpeed ZeRO-3 cannot partition zero-dimensional parameters ({names}): {fix}"
            )
        half = any(config.get(k, {}).get("enabled") is True for k in ("fp16", "bf16"))
        clipping = config.get("gradient_clipping", 1.0)  # DeepSpeed's default is 1.0
        if stage == 0 and not half and isinstance(clipping, (int, float)) and clipping > 0:
            raise ConfigError(
                f"DeepSpeed without ZeRO cannot clip the gradients of zero-dimensional parameters "
                f"({names}): {fix}, or set gradient_clipping to 0"
            )
        if torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
            device = self.context.device
            for _, p in scalars:
                value = p.detach().reshape(1).to(device)
                torch.distributed.broadcast(value, src=0)
                with torch.no_grad():
                    p.copy_(value.reshape(()))
        for _, p in scalars:
            vars(p)["ds_optim_param"] = True  # DeepSpeed's mark, unknown to torch's Parameter
        try:
            yield
        finally:
            for _, p in scalars:
                del vars(p)["ds_optim_param"]

    def _sequence_parallel_mpu(self, model: torch.nn.Module, config: DeepSpeedConfig) -> object:
        """The groups for ``deepspeed.initialize``; a transformers model's attention becomes Ulysses."""
        layout = self.sequence_parallel
        assert layout is not None  # called only when sequence parallelism is on
        if not is_transformers_model(model):
            self.mpu = initialize_groups(layout.sp_size)
            return self.mpu
        micro = config.get("train_micro_batch_size_per_gpu")
        if not isinstance(micro, int):
            raise ConfigError(
                "DeepSpeed sequence parallelism needs the micro-batch size for Ulysses attention: "
                "pass the training data loader to the same accelerator.prepare() call as the "
                "model, or set train_micro_batch_size_per_gpu in the DeepSpeed config"
            )
        handler = sp_options(self.context.parallelism_config)
        self.mpu = register_attention(model, handler, layout.sp_size, micro)
        return self.mpu

    @staticmethod
    def _offload_ready(
        optimizer: torch.optim.Optimizer, config: DeepSpeedConfig
    ) -> torch.optim.Optimizer:
        """With optimizer offload, torch Adam/AdamW become DeepSpeedCPUAdam (same param groups)."""
        device = (config.get("zero_optimization", {}).get("offload_optimizer") or {}).get("device")
        if device in (None, "none") or type(optimizer) not in (torch.optim.Adam, torch.optim.AdamW):
            return optimizer
        from deepspeed.ops.adam import DeepSpeedCPUAdam

        defaults = {k: optimizer.defaults[k] for k in ("lr", "weight_decay", "betas", "eps")}
        return DeepSpeedCPUAdam(
            optimizer.param_groups,
            adamw_mode=type(optimizer) is torch.optim.AdamW,
            **defaults,
        )

    def _record_forward(self, engine: DeepSpeedEngine, args: tuple[object, ...]) -> None:
        if engine in self._last_forward:
            self._last_forward.remove(engine)
        self._last_forward.append(engine)

    # -- training step ----------------------------------------------------------
    def engine_of(self, model: object) -> DeepSpeedEngine | None:
        """The engine of a prepared model (the engine itself or the module inside it), or None."""
        for engine in self.engines:
            if model is engine or model is engine.module:
                return engine
        return None

    def _engine_for_backward(self, model: object) -> DeepSpeedEngine:
        if model is not None:
            engine = self.engine_of(model)
            if engine is None:
                raise ValueError(
                    "accelerator.backward(loss, model=...): that model was not prepared"
                )
            return engine
        if len(self.engines) == 1:
            return self.engines[0]
        if len(self._last_forward) == 1:
            return self._last_forward[0]
        if not self.engines:
            raise ValueError(
                "accelerator.backward with DeepSpeed: prepare a model and its optimizer first"
            )
        raise ValueError(
            "several DeepSpeed engines ran forward since their last backward: say which one this "
            "loss trains with accelerator.backward(loss, model=model)"
        )

    def backward(self, loss: torch.Tensor, **kwargs: object) -> None:
        """Backward and, on synchronising micro-batches, the optimizer step, through the engine.

        As in Accelerate, ``scale_wrt_gas`` (default True) says whether the loss is divided
        by the accumulation steps; transformers' Trainer divides the loss itself and passes
        ``scale_wrt_gas=False``. Other keyword arguments go to ``engine.backward``.
        """
        engine = self._engine_for_backward(kwargs.pop("model", None))
        scale_wrt_gas = bool(kwargs.pop("scale_wrt_gas", True))
        if not core_leaves_loss_scaling_to_backends():
            # accel-core already divided the loss by the accumulation steps: undo it when the
            # caller asked for no scaling
            steps = self.context.gradient_accumulation_steps
            if not scale_wrt_gas and steps > 1:
                loss = loss * steps
            scale_wrt_gas = False
        DeepSpeedEngineWrapper(engine).backward(
            loss,
            sync_gradients=self.context.sync_gradients,
            scale_wrt_gas=scale_wrt_gas,
            **kwargs,
        )
        if engine in self._last_forward:
            self._last_forward.remove(engine)

    @contextlib.contextmanager
    def no_sync(self, model: torch.nn.Module) -> Generator[None, None, None]:
        """Nothing to do: the engine's accumulation boundary follows ``sync_gradients``."""
        yield

    def clip_grad_norm_(
        self, parameters: Iterable[torch.Tensor], max_norm: float, norm_type: float = 2.0
    ) -> torch.Tensor | None:
        """The gradient norm of the engine's last step; DeepSpeed clipped to its ``gradient_clipping``."""
        ids = {id(p) for p in parameters}
        engine = next(
            (e for e in self.engines if any(id(p) in ids for p in e.module.parameters())), None
        )
        if engine is None:
            return None
        configured = engine.gradient_clipping()
        if not self._warned_clip and float(configured or 0.0) != float(max_norm):
            self._warned_clip = True
            warnings.warn(
                f"DeepSpeed clips gradients itself, to gradient_clipping={configured} from its config; "
                f"clip_grad_norm_(max_norm={max_norm}) only returns the norm. Set gradient_clipping "
                "in the DeepSpeedPlugin / deepspeed_config to change the clipping",
                stacklevel=3,
            )
        return DeepSpeedEngineWrapper(engine).get_global_grad_norm()

    def clip_grad_value_(self, parameters: Iterable[torch.Tensor], clip_value: float) -> None:
        """Not available: DeepSpeed only clips by norm (its ``gradient_clipping``)."""
        raise NotImplementedError(
            "DeepSpeed clips gradients by norm only: use gradient_clipping in the DeepSpeed config "
            "and accelerator.clip_grad_norm_"
        )

    # -- models and state -------------------------------------------------------
    def unwrap_model(
        self,
        model: torch.nn.Module,
        keep_fp32_wrapper: bool = True,
        keep_torch_compile: bool = True,
    ) -> torch.nn.Module:
        """The user's model inside its engine."""
        engine = self.engine_of(model)
        inner = engine.module if engine is not None else model
        return super().unwrap_model(
            inner, keep_fp32_wrapper=keep_fp32_wrapper, keep_torch_compile=keep_torch_compile
        )

    def get_state_dict(
        self, model: torch.nn.Module, unwrap: bool = True
    ) -> dict[str, torch.Tensor]:
        """The full state dict; with ZeRO-3 gathered from every process (call it on all of them).

        With ``zero3_save_16bit_model`` the 16-bit weights are consolidated on the main
        process (others get ``{}``), as ``stage3_gather_16bit_weights_on_model_save``
        does; otherwise every process gathers the full weights.
        """
        engine = self.engine_of(model)
        if engine is None:
            return super().get_state_dict(model, unwrap=unwrap)
        if engine.zero_optimization_partition_weights():
            if engine.zero_gather_16bit_weights_on_model_save():
                return engine._zero3_consolidated_16bit_state_dict() or {}
            import deepspeed

            params = list(engine.module.parameters())
            with deepspeed.zero.GatheredParameters(params, modifier_rank=None):
                return {k: v.detach().cpu().clone() for k, v in engine.module.state_dict().items()}
        from deepspeed.checkpoint.utils import clone_tensors_for_torch_save

        return clone_tensors_for_torch_save(engine.module.state_dict())

    def load_model_state_dict(
        self, model: torch.nn.Module, state_dict: dict[str, torch.Tensor], strict: bool = True
    ) -> Any:
        """Load a full state dict into the engine's module (ZeRO-3: into every partition)."""
        engine = self.engine_of(model)
        if engine is None or not engine.zero_optimization_partition_weights():
            return super().load_model_state_dict(model, state_dict, strict=strict)
        import deepspeed

        params = list(engine.module.parameters())
        with deepspeed.zero.GatheredParameters(params, modifier_rank=0):
            if self.context.is_main_process:
                return engine.module.load_state_dict(state_dict, strict=strict)
        return None

    def save_model_state(
        self, model: torch.nn.Module, folder: Path, index: int, safe_serialization: bool = True
    ) -> None:
        """A DeepSpeed checkpoint (model, optimizer, scheduler, ZeRO shards) tagged ``pytorch_model[_i]``."""
        engine = self.engine_of(model)
        if engine is None:
            return super().save_model_state(model, folder, index, safe_serialization)
        from deepspeed.checkpoint.constants import (
            UNIVERSAL_CHECKPOINT_INFO,
            UNIVERSAL_CHECKPOINT_VERSION_KEY,
            UNIVERSAL_CHECKPOINT_VERSION_VALUE,
        )

        # what DeepSpeed's ds_to_universal needs to convert the checkpoint for another
        # data-parallel size (no tensor-parallel patterns: ZeRO alone shards no layer)
        info = {UNIVERSAL_CHECKPOINT_VERSION_KEY: UNIVERSAL_CHECKPOINT_VERSION_VALUE}
        engine.save_checkpoint(
            str(folder), tag=checkpoint_tag(index), client_state={UNIVERSAL_CHECKPOINT_INFO: info}
        )

    def load_model_state(
        self,
        model: torch.nn.Module,
        folder: Path,
        index: int,
        strict: bool = True,
        weights_only: bool = True,
    ) -> None:
        """Restore the DeepSpeed checkpoint written by :meth:`save_model_state`."""
        engine = self.engine_of(model)
        if engine is None:
            return super().load_model_state(
                model, folder, index, strict=strict, weights_only=weights_only
            )
        tag = checkpoint_tag(index)
        if not (Path(folder) / tag).is_dir():
            raise CheckpointError(
                f"{folder} has no DeepSpeed checkpoint {tag}/ for model {index}: was it saved with "
                "accelerator.save_state under DeepSpeed?"
            )
        tag = resharded_tag(engine, Path(folder), tag)
        path, _ = engine.load_checkpoint(
            str(folder),
            tag=tag,
            load_module_strict=strict,
            load_optimizer_states=True,
            load_lr_scheduler_states=True,
        )
        if path is None:
            raise CheckpointError(f"DeepSpeed could not load checkpoint {tag} from {folder}")

    def save_optimizer_state(
        self,
        optimizer: torch.optim.Optimizer,
        folder: Path,
        index: int,
        model: torch.nn.Module | None = None,
    ) -> None:
        """Nothing for DeepSpeed optimizers: their state is in the engine's checkpoint."""
        if not isinstance(optimizer, DeepSpeedOptimizerWrapper):
            super().save_optimizer_state(optimizer, folder, index, model)

    def load_optimizer_state(
        self,
        optimizer: torch.optim.Optimizer,
        folder: Path,
        index: int,
        model: torch.nn.Module | None = None,
        weights_only: bool = True,
    ) -> None:
        """Nothing for DeepSpeed optimizers: the engine's checkpoint restored them."""
        if not isinstance(optimizer, DeepSpeedOptimizerWrapper):
            super().load_optimizer_state(optimizer, folder, index, model, weights_only)
