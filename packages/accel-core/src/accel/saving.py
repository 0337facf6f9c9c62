"""The Accelerator's saving and resuming methods (a mixin of :class:`~accel.accelerator.Accelerator`)."""

from __future__ import annotations

import os
import shutil
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from . import checkpointing
from .errors import CheckpointError
from .logging import get_logger
from .utils.modeling import save_weights

logger = get_logger(__name__)


class SavingMixin:
    """``save``, ``save_model``, ``save_state`` / ``load_state`` and their registrations."""

    def save(self, obj: Any, f: str | os.PathLike, safe_serialization: bool = False) -> None:
        """Save ``obj`` once per machine (``torch.save``, or safetensors for a tensor dict); written atomically."""
        if (
            not self.is_local_main_process
            if self.project_configuration.save_on_each_node
            else not self.is_main_process
        ):
            return
        path = Path(f)
        tmp = path.with_name(path.name + ".tmp")
        if safe_serialization:
            from safetensors.torch import save_file

            save_file(obj, tmp, metadata={"format": "pt"})
        else:
            torch.save(obj, tmp)
        os.replace(tmp, path)

    def save_model(
        self,
        model: torch.nn.Module,
        save_directory: str | os.PathLike,
        max_shard_size: int | str = "10GB",
        safe_serialization: bool = True,
    ) -> None:
        """Save the model's weights (safetensors by default) in shards of ``max_shard_size`` with an index JSON."""
        if os.path.isfile(save_directory):
            raise ValueError(f"save_directory {save_directory} is a file: pass a directory")
        state_dict = self.get_state_dict(model)
        if self.is_main_process:
            save_weights(
                state_dict,
                save_directory,
                max_shard_size=max_shard_size,
                safe_serialization=safe_serialization,
            )
        self.wait_for_everyone()

    def register_for_checkpointing(self, *objects: Any) -> None:
        """Include objects with ``state_dict``/``load_state_dict`` in :meth:`save_state`."""
        bad = [
            i
            for i, o in enumerate(objects)
            if not (hasattr(o, "state_dict") and hasattr(o, "load_state_dict"))
        ]
        if bad:
            raise ValueError(
                f"objects at positions {bad} need state_dict() and load_state_dict() to be checkpointed"
            )
        self._custom_objects.extend(objects)

    def register_save_state_pre_hook(self, hook: Callable) -> Any:
        """``hook(models, weights, output_dir)`` runs before :meth:`save_state` writes; returns a removable handle."""
        return _Handle(self._save_model_state_pre_hook, hook)

    def register_load_state_pre_hook(self, hook: Callable) -> Any:
        """``hook(models, input_dir)`` runs before :meth:`load_state` reads; returns a removable handle."""
        return _Handle(self._load_model_state_pre_hook, hook)

    def _checkpoint_root(self) -> Path:
        if self.project_dir is None:
            raise ValueError(
                "automatic_checkpoint_naming needs a project_dir: Accelerator(project_dir=...)"
            )
        return Path(self.project_dir) / "checkpoints"

    def save_state(
        self,
        output_dir: str | os.PathLike | None = None,
        safe_serialization: bool = True,
        **save_kwargs: Any,
    ) -> str:
        """Save everything needed to resume: models, optimizers, schedulers, data positions, scaler, RNG, registered objects.

        With ``ProjectConfiguration(automatic_checkpoint_naming=True)`` the directory is
        ``project_dir/checkpoints/checkpoint_<iteration>`` and only the newest
        ``total_limit`` checkpoints are kept.
        """
        config = self.project_configuration
        if config.automatic_checkpoint_naming:
            root = self._checkpoint_root()
            output_dir = root / f"checkpoint_{config.iteration}"
            if self.is_main_process:
                root.mkdir(parents=True, exist_ok=True)
                if Path(output_dir).exists():
                    raise CheckpointError(
                        f"checkpoint {output_dir} already exists: set ProjectConfiguration(iteration=...) past it"
                    )
        elif output_dir is None:
            raise ValueError(
                "save_state needs output_dir (or ProjectConfiguration(automatic_checkpoint_naming=True))"
            )
        self.wait_for_everyone()
        path = checkpointing.save_accelerator_state(
            self, output_dir, safe_serialization=safe_serialization
        )
        if (
            config.automatic_checkpoint_naming
            and config.total_limit is not None
            and self.is_main_process
        ):
            # pruned only once the new checkpoint is complete: a failed save loses nothing
            existing = checkpointing.list_checkpoints(self._checkpoint_root())
            for old in existing[: max(len(existing) - config.total_limit, 0)]:
                shutil.rmtree(old)
        config.iteration += 1
        logger.info(f"saved state to {path}")
        return str(path)

    def load_state(
        self,
        input_dir: str | os.PathLike | None = None,
        weights_only: bool = True,
        strict: bool = True,
        **load_kwargs: Any,
    ) -> None:
        """Restore a :meth:`save_state` checkpoint (the newest one when ``input_dir`` is None and naming is automatic).

        Files are read with safetensors or ``torch.load(weights_only=True)``; pass
        ``weights_only=False`` only for checkpoints you trust.
        """
        config = self.project_configuration
        if input_dir is None:
            if not config.automatic_checkpoint_naming:
                raise ValueError(
                    "load_state needs input_dir (or ProjectConfiguration(automatic_checkpoint_naming=True))"
                )
            found = checkpointing.list_checkpoints(self._checkpoint_root())
            if not found:
                raise CheckpointError(f"no checkpoint_N directory in {self._checkpoint_root()}")
            input_dir = found[-1]
        meta = checkpointing.load_accelerator_state(
            self, input_dir, weights_only=weights_only, strict=strict
        )
        self.step = meta.get("step", self.step)
        self.gradient_state.step = meta.get("gradient_step", self.gradient_state.step)
        match = checkpointing.CHECKPOINT_PATTERN.match(Path(input_dir).name)
        if config.automatic_checkpoint_naming and match:
            config.iteration = int(match.group(1)) + 1
        logger.info(f"loaded state from {input_dir}")

    def skip_first_batches(self, dataloader: Any, num_batches: int = 0) -> Any:
        """The data loader, starting after its first ``num_batches`` batches on its next iteration."""
        from .data_loader import skip_first_batches

        return skip_first_batches(dataloader, num_batches)


class _Handle:
    """A removable registration in an ordered dict of hooks."""

    _next_id = 0

    def __init__(self, hooks: OrderedDict[int, Callable], hook: Callable):
        self.hooks = hooks
        self.id = _Handle._next_id
        _Handle._next_id += 1
        hooks[self.id] = hook

    def remove(self) -> None:
        """Unregister the hook."""
        self.hooks.pop(self.id, None)
