"""Saving and resuming: the :class:`~accel.Accelerator` members over its checkpoint manager.

:class:`CheckpointingMixin`, a base of ``Accelerator``, holds ``save_state`` / ``load_state`` /
``resume`` / ``save_model`` and the checkpoint registrations. It works on the Accelerator's own
attributes (``checkpoints``, ``backend``, ``prepared``, ``step``, ...).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from accel.checkpoint.manager import CheckpointManager, HookHandle
from accel.checkpoint.view import RunView
from accel.elastic.plan import apply_resume, samples_per_step, scheduler_steps, step_meta
from accel.logging import get_logger

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

    from accel.backends.base import Backend
    from accel.kwargs import ProjectConfiguration
    from accel.microbatch import MicroBatching
    from accel.prepared import PreparedObjects
    from accel.state import GradientState

logger = get_logger("accel.accelerator")  # the Accelerator's logger: resume's line keeps its name


class CheckpointingMixin:
    """The saving and resuming members of :class:`~accel.Accelerator` (see its ``checkpoints``)."""

    if TYPE_CHECKING:  # the Accelerator's attributes these members work on

        @property
        def backend(self) -> Backend: ...
        @property
        def process_index(self) -> int: ...
        @property
        def local_process_index(self) -> int: ...
        @property
        def is_main_process(self) -> bool: ...
        @property
        def is_local_main_process(self) -> bool: ...

        checkpoints: CheckpointManager
        gradient_state: GradientState
        micro_batching: MicroBatching

        @property
        def num_processes(self) -> int: ...

        @property
        def split_batches(self) -> bool: ...

        @property
        def gradient_accumulation_steps(self) -> int: ...

        @gradient_accumulation_steps.setter
        def gradient_accumulation_steps(self, steps: int) -> None: ...

        prepared: PreparedObjects
        project_configuration: ProjectConfiguration
        step: int

    def save(self, obj: object, f: str | os.PathLike, safe_serialization: bool = False) -> None:
        """Save ``obj`` (``torch.save``, or safetensors for a tensor dict) atomically, from one
        process: :meth:`CheckpointManager.save <accel.checkpoint.manager.CheckpointManager.save>`.

        The main process writes it; with ``save_on_each_node`` each machine's local main one.
        """
        self.checkpoints.save(obj, f, safe_serialization)

    def save_model(
        self,
        model: torch.nn.Module,
        save_directory: str | os.PathLike,
        max_shard_size: int | str = "10GB",
        safe_serialization: bool = True,
    ) -> None:
        """Save the model's full weights (safetensors by default) in shards of ``max_shard_size`` with an index JSON.

        A model with offloaded weights (``dispatch_model`` with ``"cpu"``/``"disk"`` entries,
        ``cpu_offload``, ``disk_offload``) is saved with its real weights, loaded module by
        module (:func:`accel.big_model.hooks.get_state_dict_offloaded_model`); weights left on
        the meta device are an error (Accelerate saves without them, with a warning). Other
        models give the backend's full state dict. The writing is :meth:`CheckpointManager.write_weights
        <accel.checkpoint.manager.CheckpointManager.write_weights>`.
        """
        from accel.big_model.hooks import get_state_dict_offloaded_model, has_offloaded_params

        if os.path.isfile(save_directory):
            raise ValueError(f"save_directory {save_directory} is a file: pass a directory")
        if any(map(has_offloaded_params, model.modules())):
            unwrapped = self.backend.unwrap_model(model)
            state_dict = get_state_dict_offloaded_model(unwrapped)
            missing = sorted(unwrapped.state_dict(keep_vars=True).keys() - state_dict.keys())
            if missing:
                raise RuntimeError(
                    f"save_model: {len(missing)} weights are on the meta device and offloaded "
                    f"nowhere (e.g. {missing[:3]}): load them first"
                )
        elif any(p.device.type == "meta" for p in model.parameters()):
            raise RuntimeError(
                "save_model: some parameters are on the meta device (they have no values): "
                "load the weights first (load_checkpoint_and_dispatch / load_state_dict)"
            )
        else:
            state_dict = self.backend.get_state_dict(model)
        self.checkpoints.write_weights(
            state_dict, save_directory, max_shard_size, safe_serialization
        )

    def register_for_checkpointing(self, *objects: object) -> None:
        """Include objects with ``state_dict``/``load_state_dict`` in :meth:`save_state`."""
        self.checkpoints.register_for_checkpointing(*objects)

    def register_save_state_pre_hook(self, hook: Callable) -> HookHandle:
        """``hook(models, weights, output_dir)`` runs before :meth:`save_state` writes; returns a removable handle."""
        return self.checkpoints.register_save_state_pre_hook(hook)

    def register_load_state_pre_hook(self, hook: Callable) -> HookHandle:
        """``hook(models, input_dir)`` runs before :meth:`load_state` reads; returns a removable handle."""
        return self.checkpoints.register_load_state_pre_hook(hook)

    def save_state(
        self,
        output_dir: str | os.PathLike | None = None,
        safe_serialization: bool = True,
        async_save: bool = False,
        **save_kwargs: object,
    ) -> str:
        """Save everything needed to resume: models, optimizers, schedulers, data positions, scaler, RNG, registered objects.

        With ``ProjectConfiguration(automatic_checkpoint_naming=True)`` the directory is
        ``project_dir/checkpoints/checkpoint_<iteration>`` and only the newest
        ``total_limit`` checkpoints are kept.

        ``async_save=True`` returns once the state is copied off the training tensors (to
        CPU memory); the files are written in the background and the checkpoint appears
        under its name only when complete. The next save, :meth:`load_state`,
        :meth:`wait_for_everyone`, :meth:`end_training` and interpreter exit wait for it; a
        failed write raises :class:`~accel.errors.CheckpointError` at the next of these
        calls or of :meth:`backward`. Backends that write their own files (FSDP sharded,
        DeepSpeed) save synchronously.
        """
        from accel.plugins import hook

        meta = {
            "step": self.step,
            "gradient_step": self.gradient_state.step,
            **step_meta(
                self.num_processes,
                self.gradient_accumulation_steps,
                scheduler_steps(self.prepared.schedulers, self),
                samples_per_step(self),
            ),
            "micro_batching": self.micro_batching.state_dict(),
        }
        path = str(
            self.checkpoints.save_state(
                output_dir, safe_serialization, meta=meta, async_save=async_save
            )
        )
        hook().accel_checkpoint_saved(run=RunView.of(self, path), path=path)
        return path

    def load_state(
        self,
        input_dir: str | os.PathLike | None = None,
        weights_only: bool = True,
        strict: bool = True,
        **load_kwargs: object,
    ) -> None:
        """Restore a :meth:`save_state` checkpoint (the newest one when ``input_dir`` is None and naming is automatic).

        Files are read with safetensors or ``torch.load(weights_only=True)``; pass
        ``weights_only=False`` only for checkpoints you trust.
        """
        meta = self.checkpoints.load_state(input_dir, weights_only=weights_only, strict=strict)
        plan = apply_resume(self, meta)
        self.step = plan.step if "step" in meta else self.step
        self.gradient_state.step = meta.get("gradient_step", self.gradient_state.step)
        if "micro_batching" in meta:  # train_step's split, in samples per micro-batch
            self.micro_batching.load_state_dict(meta["micro_batching"])

    def resume(self, weights_only: bool = True, strict: bool = True) -> str | None:
        """Load the newest complete checkpoint of ``project_dir/checkpoints``, if there is one.

        The one call that makes a script resume by itself: on its first start it finds
        nothing and returns None; after a crash, a preemption or an elastic restart
        (``accel launch --max_restarts N``) every process loads the newest checkpoint that
        is complete on all of them (model, optimizer, scheduler, the data loaders'
        position mid-epoch, RNG states, step counters, registered objects), logs one line
        (after a resize, the resize's line first) and returns its path. Incomplete checkpoints are skipped with a warning. Call it
        after ``prepare`` and ``register_for_checkpointing``; needs
        ``ProjectConfiguration(automatic_checkpoint_naming=True)``.
        """
        if not self.project_configuration.automatic_checkpoint_naming:
            raise ValueError(
                "resume() needs ProjectConfiguration(automatic_checkpoint_naming=True, ...) "
                "and a project_dir: it loads the newest project_dir/checkpoints/checkpoint_N"
            )
        from accel.plugins import hook

        # a plugin may first copy in a checkpoint its scheduler kept (accel-ray: Ray Train's)
        root = str(self.checkpoints.checkpoint_root())
        hook().accel_before_resume(run=RunView.of(self, root), checkpoint_root=root)
        latest = self.checkpoints.latest_checkpoint()
        if latest is None:
            logger.info(
                f"resume: no checkpoint in {self.checkpoints.checkpoint_root()}, starting fresh"
            )
            return None
        self.load_state(latest, weights_only=weights_only, strict=strict)
        # a warning, so the one line shows under Python's default logging configuration
        logger.warning(
            f"resumed from {latest} (step {self.step}, next checkpoint "
            f"checkpoint_{self.project_configuration.iteration})"
        )
        return str(latest)

    def skip_first_batches(self, dataloader: DataLoader, num_batches: int = 0) -> DataLoader:
        """The data loader, starting after its first ``num_batches`` batches on its next iteration."""
        from accel.data.loader import skip_first_batches

        return skip_first_batches(dataloader, num_batches)

    @property
    def save_iteration(self) -> int:
        """Number of the next automatically named checkpoint."""
        return self.project_configuration.iteration

    # Accelerate's private names, kept for user code that reads them
    @property
    def _save_model_state_pre_hook(self) -> OrderedDict[int, Callable]:
        return self.checkpoints.save_state_pre_hooks

    @property
    def _load_model_state_pre_hook(self) -> OrderedDict[int, Callable]:
        return self.checkpoints.load_state_pre_hooks
