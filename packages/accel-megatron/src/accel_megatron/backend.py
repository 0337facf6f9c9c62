"""The Megatron-LM backend: megatron-core parallel state, whole-``prepare``, schedules and checkpoints."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch
import torch.distributed as dist
from accel.backends import Backend
from accel.distributed.process import ensure_process_group, plugin_object
from accel.errors import ConfigError

from .config import MegatronLMPlugin, filled
from .cpu import cpu_execution, install_cpu_rng_tracker
from .data import MegatronLMDummyDataLoader
from .engine import MegatronEngine
from .optimizer import MegatronLMOptimizerWrapper, install_init_state_fn, optimizer_config
from .scheduler import MegatronLMDummyScheduler, MegatronLMSchedulerWrapper, build_param_scheduler

if TYPE_CHECKING:
    from accel.data.shard import DataLoaderShard
    from megatron.core.optimizer import MegatronOptimizer


class MegatronLMBackend(Backend):
    """Tensor, pipeline and sequence parallelism with megatron-core (``distributed_type: MEGATRON_LM``).

    ``prepare`` takes every object at once: data loaders first (they fix the
    micro-batch and global batch sizes; a :class:`MegatronLMDummyDataLoader` becomes the
    train, valid and test loaders over megatron-core GPT datasets), then the megatron-core model (wrapped in
    megatron-core's DistributedDataParallel and a :class:`MegatronEngine`), the
    optimizer (rebuilt as a megatron-core optimizer) and the
    :class:`MegatronLMDummyScheduler` (megatron-core's ``OptimizerParamScheduler``).
    """

    @property
    def micro_batching_refusal(self) -> str | None:
        """Megatron-LM runs its own micro-batches: ``train_step`` is refused."""
        return (
            "train_step (automatic micro-batching) is not available with Megatron-LM: its schedule "
            "runs the micro-batches; set num_micro_batches in the MegatronLMPlugin instead"
        )

    name = "megatron_lm"
    distributed_types = ("MEGATRON_LM",)

    def setup(self) -> None:
        """Read the plugin, check it against the world size, and initialise megatron-core's groups."""
        run = self.context
        self.plugin: MegatronLMPlugin = plugin_object(run, "megatron_lm_plugin", MegatronLMPlugin)
        self.plugin.attach(run)  # its helpers (build_gpt_model) read the run's precision there
        if run.gradient_accumulation_steps > 1:
            raise ConfigError(
                f"gradient_accumulation_steps={run.gradient_accumulation_steps} does not apply under "
                "MEGATRON_LM: accumulate with megatron_lm_num_micro_batches instead"
            )
        ensure_process_group()  # one process: megatron-core still needs a group
        self.world_size = dist.get_world_size()
        self.dp_degree = self.plugin.dp_degree(self.world_size)
        self.on_cpu = run.device.type == "cpu"
        self._initialize_parallel_state()
        self.model: MegatronEngine | None = None
        self.megatron_optimizer: MegatronOptimizer | None = None
        self.optimizer: MegatronLMOptimizerWrapper | None = None

    def _initialize_parallel_state(self) -> None:
        from megatron.core import parallel_state as ps

        plugin = self.plugin
        if ps.model_parallel_is_initialized():
            tp = ps.get_tensor_model_parallel_world_size()
            pp = ps.get_pipeline_model_parallel_world_size()
            if (tp, pp) != (plugin.tp_degree, plugin.pp_degree):
                raise ConfigError(
                    f"megatron-core is already initialised with tp={tp}, pp={pp} in this process; "
                    f"the plugin asks for tp={plugin.tp_degree}, pp={plugin.pp_degree}"
                )
            return
        ps.initialize_model_parallel(
            tensor_model_parallel_size=filled(plugin.tp_degree),
            pipeline_model_parallel_size=filled(plugin.pp_degree),
        )
        if self.on_cpu:
            install_cpu_rng_tracker(filled(plugin.seed))
        else:
            from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

            model_parallel_cuda_manual_seed(filled(plugin.seed))

    # -- groups -------------------------------------------------------------
    @property
    def data_parallel_rank(self) -> int:
        """This process's rank in its data-parallel group."""
        from megatron.core import parallel_state as ps

        return ps.get_data_parallel_rank()

    # -- prepare ------------------------------------------------------------
    def prepare(self, objects: list[object], device_placement: list[bool]) -> list[object]:
        """Prepare data loaders, then the model, its optimizer and the scheduler, all at once."""
        result: list[object] = list(objects)
        seen: dict[int, int] = {}  # a MegatronLMDummyDataLoader's occurrences: train, valid, test
        for index, obj in enumerate(objects):
            if isinstance(obj, MegatronLMDummyDataLoader):
                split = seen.get(id(obj), 0)
                seen[id(obj)] = split + 1
                if split > 2:
                    raise ValueError(
                        "a MegatronLMDummyDataLoader stands for at most 3 loaders (train, valid, test)"
                    )
                loader = obj.data_loader(split)
                result[index] = (
                    None
                    if loader is None
                    else self.prepare_data_loader(loader, device_placement[index])
                )
            elif isinstance(obj, torch.utils.data.DataLoader):
                result[index] = self.prepare_data_loader(obj, device_placement[index])
        models = [(i, o) for i, o in enumerate(objects) if isinstance(o, torch.nn.Module)]
        if len(models) > 1:
            raise ValueError("MEGATRON_LM prepares one model per Accelerator")
        for index, model in models:
            result[index] = self.prepare_model(model, device_placement[index])
        for index, obj in enumerate(objects):
            if isinstance(obj, torch.optim.Optimizer):
                result[index] = self.prepare_optimizer(obj, device_placement[index])
        for index, obj in enumerate(objects):
            if isinstance(obj, MegatronLMDummyScheduler):
                result[index] = self._prepare_dummy_scheduler(obj)
            elif isinstance(obj, torch.optim.lr_scheduler.LRScheduler):
                raise ConfigError(
                    "under MEGATRON_LM the learning-rate schedule is megatron-core's: replace "
                    f"{type(obj).__name__} with accel_megatron.MegatronLMDummyScheduler(optimizer, "
                    "total_num_steps=..., warmup_num_steps=...)"
                )
        return result

    def prepare_data_loader(
        self, dataloader: torch.utils.data.DataLoader, device_placement: bool = True
    ) -> DataLoaderShard:
        """Batches of ``batch_size * num_micro_batches`` samples, sharded over the data-parallel group only.

        Every tensor- and pipeline-parallel peer of a process sees the same samples.
        The first loader prepared sets ``plugin.global_batch_size``.
        """
        from accel.data.loader import prepare_data_loader
        from megatron.core import parallel_state as ps

        run = self.context
        plugin = self.plugin
        if dataloader.batch_size is None:
            raise ValueError(
                "MEGATRON_LM needs data loaders with a batch_size (the micro-batch size), not a batch_sampler"
            )
        if plugin.global_batch_size is None:
            plugin.set_batch_sizes(dataloader.batch_size, self.world_size)
        combined = _with_batch_size(
            dataloader, dataloader.batch_size * filled(plugin.num_micro_batches)
        )
        config = run.dataloader_config
        seed = config.data_seed
        if seed is None:
            seed = [int(torch.empty((), dtype=torch.int64).random_().item())]
            dist.broadcast_object_list(seed, src=0)
            seed = seed[0]
        return prepare_data_loader(
            combined,
            device=run.device,
            num_processes=ps.get_data_parallel_world_size(),
            process_index=ps.get_data_parallel_rank(),
            put_on_device=device_placement,
            even_batches=config.even_batches,
            data_seed=seed,
            non_blocking=config.non_blocking,
        )

    def prepare_model(
        self, model: torch.nn.Module, device_placement: bool = True, evaluation_mode: bool = False
    ) -> torch.nn.Module:
        """Wrap a megatron-core model in megatron-core's DistributedDataParallel and a :class:`MegatronEngine`."""
        from megatron.core.distributed import (
            DistributedDataParallel,
            DistributedDataParallelConfig,
            finalize_model_grads,
        )

        if isinstance(model, MegatronEngine):
            return model
        config = getattr(model, "config", None)
        if config is None or not hasattr(config, "tensor_model_parallel_size"):
            raise TypeError(
                f"MEGATRON_LM trains megatron-core models (a module with a TransformerConfig as .config, e.g. "
                f"accel_megatron.build_gpt_model(...)); got {type(model).__name__}"
            )
        self._check_model_config(config)
        if not hasattr(model, "model_type"):  # the schedules ask; a plain decoder or MLP is this
            from megatron.core.enums import ModelType

            model.model_type = ModelType.encoder_or_decoder
        if device_placement:
            model = model.to(self.context.device)
        ddp_config = DistributedDataParallelConfig(
            grad_reduce_in_fp32=True,
            overlap_grad_reduce=False,
            use_distributed_optimizer=filled(self.plugin.use_distributed_optimizer),
        )
        with cpu_execution(self.on_cpu):
            wrapped = DistributedDataParallel(config=config, ddp_config=ddp_config, module=model)
        config.no_sync_func = wrapped.no_sync
        config.finalize_model_grads_func = finalize_model_grads
        # as Megatron-LM trains: pipeline outputs are freed once sent, and backward runs
        # through the autograd engine directly (inside cpu_execution on CPU, too)
        config.deallocate_pipeline_outputs = True
        self.model = MegatronEngine(wrapped, self.plugin, self.on_cpu)
        return self.model

    def _check_model_config(self, config: object) -> None:
        plugin = self.plugin
        wanted = {
            "tensor_model_parallel_size": plugin.tp_degree,
            "pipeline_model_parallel_size": plugin.pp_degree,
            "sequence_parallel": plugin.sequence_parallelism,
        }
        for field, value in wanted.items():
            if getattr(config, field, value) != value:
                raise ConfigError(
                    f"the model was built with {field}={getattr(config, field)} but the "
                    f"MegatronLMPlugin says {value}: build it from plugin.transformer_config(...)"
                )

    def prepare_optimizer(
        self, optimizer: torch.optim.Optimizer, device_placement: bool = True
    ) -> MegatronLMOptimizerWrapper:
        """Rebuild ``optimizer`` as a megatron-core optimizer over the prepared model."""
        from megatron.core.optimizer import get_megatron_optimizer

        if self.model is None:
            raise ValueError(
                "MEGATRON_LM: prepare the model together with (or before) its optimizer"
            )
        config = optimizer_config(optimizer, self.plugin, self.context.precision, self.on_cpu)
        with cpu_execution(self.on_cpu):
            # the prepared model is megatron-core's DistributedDataParallel, which torch's
            # Module.__getattr__ types as a plain module
            self.megatron_optimizer = get_megatron_optimizer(
                config,
                [self.model.module],
            )
        install_init_state_fn(self.megatron_optimizer, config)
        self.optimizer = MegatronLMOptimizerWrapper(
            self.megatron_optimizer, self.model, self.plugin, self.on_cpu
        )
        return self.optimizer

    def _prepare_dummy_scheduler(
        self, dummy: MegatronLMDummyScheduler
    ) -> MegatronLMSchedulerWrapper:
        if self.megatron_optimizer is None:
            raise ValueError(
                "MEGATRON_LM: prepare the optimizer together with (or before) MegatronLMDummyScheduler"
            )
        scheduler = build_param_scheduler(dummy, self.megatron_optimizer, self.plugin)
        return MegatronLMSchedulerWrapper(scheduler, [self.optimizer])

    # -- training step ------------------------------------------------------
    def backward(self, loss: torch.Tensor, **kwargs: object) -> None:
        """Nothing to do: the prepared model's forward already ran backward for every micro-batch."""

    def clip_grad_norm_(
        self, parameters: Iterable[torch.Tensor], max_norm: float, norm_type: float = 2.0
    ) -> torch.Tensor | None:
        """Clipping happens in ``optimizer.step()`` at ``megatron_lm_gradient_clipping``; returns None."""
        if float(max_norm) != self.plugin.gradient_clipping:
            warnings.warn(
                f"under MEGATRON_LM gradients are clipped in optimizer.step() to "
                f"megatron_lm_gradient_clipping={self.plugin.gradient_clipping}, not {max_norm}",
                stacklevel=3,
            )
        return None

    # -- models and state -------------------------------------------------------
    def _model_of(self, model: torch.nn.Module | None) -> torch.nn.Module | MegatronEngine:
        """``model``, else the prepared one."""
        found = model or self.model
        if found is None:
            raise ValueError("MEGATRON_LM: no prepared model to save or load the optimizer for")
        return found

    def unwrap_model(
        self,
        model: torch.nn.Module | MegatronEngine,
        keep_fp32_wrapper: bool = True,
        keep_torch_compile: bool = True,
    ) -> torch.nn.Module:
        """The user's megatron-core model (this process's shard of it)."""
        return model.inner if isinstance(model, MegatronEngine) else model

    def get_state_dict(
        self, model: torch.nn.Module, unwrap: bool = True
    ) -> dict[str, torch.Tensor]:
        """This process's shard of the model's weights (tensor and pipeline parallel parts stay split)."""
        return self.unwrap_model(model).state_dict()

    def save_model_state(
        self, model: torch.nn.Module, folder: Path, index: int, safe_serialization: bool = True
    ) -> None:
        """Every process writes its shard into ``model_<index>/`` (megatron-core distributed checkpoint)."""
        from .checkpoint import save_model

        save_model(self.unwrap_model(model), Path(folder) / f"model_{index}", self.on_cpu)

    def load_model_state(
        self,
        model: torch.nn.Module,
        folder: Path,
        index: int,
        strict: bool = True,
        weights_only: bool = True,
    ) -> None:
        """Every process reads what its shard needs from ``model_<index>/``, whatever the saved degrees."""
        from .checkpoint import load_model

        load_model(self.unwrap_model(model), Path(folder) / f"model_{index}", self.on_cpu, strict)

    def save_optimizer_state(
        self,
        optimizer: torch.optim.Optimizer,
        folder: Path,
        index: int,
        model: torch.nn.Module | None = None,
    ) -> None:
        """Every process writes its optimizer states into ``optimizer_<index>/``."""
        from .checkpoint import save_optimizer

        save_optimizer(
            _megatron_optimizer(optimizer),
            self.unwrap_model(self._model_of(model)),
            Path(folder) / f"optimizer_{index}",
            self.on_cpu,
        )

    def load_optimizer_state(
        self,
        optimizer: torch.optim.Optimizer,
        folder: Path,
        index: int,
        model: torch.nn.Module | None = None,
        weights_only: bool = True,
    ) -> None:
        """Every process restores its optimizer states from ``optimizer_<index>/``."""
        from .checkpoint import load_optimizer

        load_optimizer(
            _megatron_optimizer(optimizer),
            self.unwrap_model(self._model_of(model)),
            Path(folder) / f"optimizer_{index}",
            self.on_cpu,
        )


def _megatron_optimizer(optimizer: torch.optim.Optimizer) -> MegatronOptimizer:
    """The megatron-core optimizer behind a prepared optimizer (this backend's
    :meth:`~MegatronLMBackend.prepare_optimizer` makes every one a :class:`MegatronLMOptimizerWrapper`)."""
    return cast("MegatronLMOptimizerWrapper", optimizer).megatron_optimizer


def _with_batch_size(
    dataloader: torch.utils.data.DataLoader, batch_size: int
) -> torch.utils.data.DataLoader:
    """The same loader yielding ``batch_size`` samples per batch."""
    from torch.utils.data import DataLoader, IterableDataset

    iterable = isinstance(dataloader.dataset, IterableDataset)
    return DataLoader(
        dataloader.dataset,
        batch_size=batch_size,
        sampler=None if iterable else dataloader.sampler,
        collate_fn=dataloader.collate_fn,
        drop_last=dataloader.drop_last,
        num_workers=dataloader.num_workers,
        pin_memory=dataloader.pin_memory,
        timeout=dataloader.timeout,
        worker_init_fn=dataloader.worker_init_fn,
        generator=dataloader.generator,
    )
