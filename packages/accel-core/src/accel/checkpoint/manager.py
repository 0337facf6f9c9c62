"""The orchestration of ``save_state`` / ``load_state`` / ``save_model`` / ``save``.

:class:`CheckpointManager` is the Accelerator's checkpointing component. It is given,
explicitly, what it works on: the run's context (a :class:`RunContext`, in practice the
:class:`~accel.backends.BackendContext`, from which it reads the prepared objects, the
process state and the *current* precision, the loss scaler's state, at every save and
load: the precision has one home, the context), the backend (a :class:`StateIO`: it
writes and reads each model and optimizer, sharded, gathered, ...) and the project
configuration. It owns the save/load pre-hooks. It imports neither the Accelerator nor
``accel.backends`` nor ``accel.big_model``: both are described here by the protocols it
calls, and an offloaded model's weights are read by the caller (``Accelerator.save_model``).

A checkpoint is first written under a temporary name next to its destination, gets its
manifest (:mod:`accel.checkpoint.manifest`: every file and its size) once every process
has written its part, and is renamed into place only then, so a crash never leaves a
half-written checkpoint under the real name; old checkpoints are pruned by renaming them
out of the way before deleting them. Loading checks the manifest and names a missing or
truncated file; choosing the newest checkpoint skips incomplete ones, and every process
agrees on which one. Everything is read back with safetensors or
``torch.load(weights_only=True)``: a pickle carrying code is refused.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, cast

import torch

from accel.checkpoint import async_writer, durable, layout, manifest
from accel.checkpoint.weights import clean_state_dict_for_safetensors, save_weights
from accel.elastic import position as positions
from accel.errors import CheckpointError
from accel.logging import get_logger
from accel.progress import progress_bar
from accel.rng import capture_rng_state, derived_seed, restore_rng_state, set_seed

if TYPE_CHECKING:
    from accel.kwargs import ProjectConfiguration
    from accel.precision.base import Precision
    from accel.prepared import PreparedObjects

logger = get_logger(__name__)

PROGRESS_MIN_BYTES = 1 << 30
"""``save_state`` / ``load_state`` show a progress bar (one step per model and optimizer, on
the local main process, on a terminal) for a state of at least this many bytes..."""
PROGRESS_MIN_FILES = 64
"""... or, when loading, for a checkpoint of more files than this (sharded checkpoints)."""


def _state_bytes(models: Iterable[torch.nn.Module], optimizers: Iterable[object]) -> int:
    """The bytes of the models' parameters and buffers and the optimizers' state tensors."""
    total = 0
    for model in models:
        for tensor in [*model.parameters(), *model.buffers()]:
            total += tensor.numel() * tensor.element_size()
    for optimizer in optimizers:
        for state in getattr(optimizer, "state", {}).values():
            for value in state.values() if isinstance(state, dict) else ():
                if isinstance(value, torch.Tensor):
                    total += value.numel() * value.element_size()
    return total


def _is_large(folder: Path) -> bool:
    """Whether the checkpoint in ``folder`` has at least PROGRESS_MIN_BYTES or many files."""
    size = files = 0
    for _root, _dirs, names in os.walk(folder):
        for name in names:
            files += 1
            try:
                size += os.stat(os.path.join(_root, name)).st_size
            except OSError:
                continue
            if size >= PROGRESS_MIN_BYTES or files > PROGRESS_MIN_FILES:
                return True
    return False


class LastResume(TypedDict, total=False):
    """What the latest load found (:attr:`CheckpointManager.last_resume`)."""

    num_processes: int | None
    """The world size in the checkpoint's manifest (None without one)."""
    positions: list[positions.Position]
    """The data loaders' positions (version 2)."""


class HookHandle:
    """A removable registration in an ordered dict of hooks (what ``register_*_hook`` returns)."""

    _next_id = 0

    def __init__(self, hooks: OrderedDict[int, Callable], hook: Callable):
        self.hooks = hooks
        self.id = HookHandle._next_id
        HookHandle._next_id += 1
        hooks[self.id] = hook

    def remove(self) -> None:
        """Unregister the hook."""
        self.hooks.pop(self.id, None)


class RunContext(Protocol):
    """What the manager reads of the run (:class:`~accel.backends.BackendContext` has it all)."""

    @property
    def prepared(self) -> PreparedObjects: ...
    @property
    def precision(self) -> Precision: ...
    @property
    def num_processes(self) -> int: ...
    @property
    def process_index(self) -> int: ...
    @property
    def is_main_process(self) -> bool: ...
    @property
    def is_local_main_process(self) -> bool: ...


class StateIO(Protocol):
    """What the manager calls on the backend; :class:`~accel.backends.Backend` declares each
    member with a default (checkpoint sits below backends: it names no backend class)."""

    supports_async_save: bool

    def unwrap_model(self, model: torch.nn.Module) -> torch.nn.Module: ...
    def get_state_dict(self, model: torch.nn.Module, unwrap: bool = True) -> dict: ...
    def wait_for_everyone(self) -> None: ...
    def save_model_state(
        self, model: torch.nn.Module, folder: Path, index: int, safe: bool
    ) -> None: ...
    def load_model_state(
        self, model: torch.nn.Module, folder: Path, index: int, *, strict: bool, weights_only: bool
    ) -> None: ...
    def save_optimizer_state(
        self, optimizer: object, folder: Path, index: int, model: torch.nn.Module | None
    ) -> None: ...
    def load_optimizer_state(
        self,
        optimizer: object,
        folder: Path,
        index: int,
        model: torch.nn.Module | None,
        *,
        weights_only: bool,
    ) -> None: ...


class CheckpointManager:
    """Saves and restores the whole training state of one Accelerator.

    :attr:`prepared`, :attr:`state` and :attr:`precision` are read from ``context`` each
    time (no copy: ``accelerator.precision = ...`` before ``prepare`` is what the next save
    writes). ``backend`` is the Accelerator's, chosen once at its construction. Step
    counters are not the manager's: :meth:`save_state` takes them as ``meta`` and
    :meth:`load_state` returns what was saved.
    """

    def __init__(
        self,
        context: RunContext,
        backend: StateIO,
        project_configuration: ProjectConfiguration,
    ):
        self.context = context
        """Where the prepared objects, the process state and the current precision live."""
        self.backend = backend
        self.project_configuration = project_configuration
        self.save_state_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
        """``hook(models, weights, output_dir)`` functions run before a save writes."""
        self.load_state_pre_hooks: OrderedDict[int, Callable] = OrderedDict()
        """``hook(models, input_dir)`` functions run before a load reads."""
        self.async_writer = async_writer.AsyncCheckpointWriter()
        self.last_resume: LastResume = {}
        """What the latest load found: ``num_processes`` that wrote it (its manifest's world
        size, None if it has none) and the data loaders' ``positions`` (version 2)."""
        """The background writer of ``save_state(..., async_save=True)`` (docs/checkpointing.md)."""

    @property
    def prepared(self) -> PreparedObjects:
        """The context's :class:`~accel.prepared.PreparedObjects`."""
        return self.context.prepared

    @property
    def state(self) -> RunContext:
        """The process facts (``num_processes``, ``is_main_process``, ...): the context's."""
        return self.context

    @property
    def precision(self) -> Precision:
        """The context's current precision (whose ``state_dict`` is the saved scaler)."""
        return self.context.precision

    # -- registrations --------------------------------------------------------
    def register_for_checkpointing(self, *objects: object) -> None:
        """Include objects with ``state_dict``/``load_state_dict`` in :meth:`save_state`."""
        self.prepared.register(*objects)

    def register_save_state_pre_hook(self, hook: Callable) -> HookHandle:
        """``hook(models, weights, output_dir)`` runs before :meth:`save_state` writes; returns a removable handle."""
        return HookHandle(self.save_state_pre_hooks, hook)

    def register_load_state_pre_hook(self, hook: Callable) -> HookHandle:
        """``hook(models, input_dir)`` runs before :meth:`load_state` reads; returns a removable handle."""
        return HookHandle(self.load_state_pre_hooks, hook)

    # -- single files -----------------------------------------------------------
    def save(self, obj: object, f: str | os.PathLike, safe_serialization: bool = False) -> None:
        """Save ``obj`` (``torch.save``, or safetensors for a tensor dict) atomically, from one process.

        The main process writes it; with ``save_on_each_node`` each machine's local main one.
        """
        writer = (
            self.state.is_local_main_process
            if self.project_configuration.save_on_each_node
            else self.state.is_main_process
        )
        if not writer:
            return
        path = Path(f)
        tmp = path.with_name(path.name + ".tmp")
        if safe_serialization:
            from safetensors.torch import save_file

            # tensors that share memory are kept once, as safetensors requires (logged)
            tensors = cast("dict[str, torch.Tensor]", obj)  # safe_serialization: a dict of tensors
            save_file(clean_state_dict_for_safetensors(tensors), tmp, metadata={"format": "pt"})
        else:
            torch.save(obj, tmp)
        os.replace(tmp, path)

    def write_weights(
        self,
        state_dict: dict[str, torch.Tensor],
        save_directory: str | os.PathLike,
        max_shard_size: int | str = "10GB",
        safe_serialization: bool = True,
    ) -> None:
        """Write a full state dict from the main process in shards of ``max_shard_size`` with an
        index JSON (:func:`~accel.checkpoint.weights.save_weights`); every process waits for it.

        :meth:`Accelerator.save_model <accel.Accelerator.save_model>` reads the weights and calls this.
        """
        if self.state.is_main_process:
            save_weights(
                state_dict,
                save_directory,
                max_shard_size=max_shard_size,
                safe_serialization=safe_serialization,
            )
        self.backend.wait_for_everyone()

    # -- whole training state -----------------------------------------------------
    def checkpoint_root(self) -> Path:
        """``project_dir/checkpoints``, where automatically named checkpoints go."""
        project_dir = self.project_configuration.project_dir
        if project_dir is None:
            raise ValueError(
                "automatic_checkpoint_naming needs a project_dir: Accelerator(project_dir=...)"
            )
        return Path(project_dir) / "checkpoints"

    def save_state(
        self,
        output_dir: str | os.PathLike | None = None,
        safe_serialization: bool = True,
        meta: Mapping[str, object] | None = None,
        async_save: bool = False,
    ) -> Path:
        """Write every prepared and registered object, the scaler, the RNG states and ``meta``.

        With automatic checkpoint naming, ``output_dir`` is chosen
        (``checkpoint_<iteration>``) and only the newest ``total_limit`` are kept.
        ``async_save`` copies the state and writes it in the background
        (:mod:`accel.checkpoint.async_writer`); a save always waits for the previous one.
        """
        self.async_writer.wait()
        config = self.project_configuration
        if config.automatic_checkpoint_naming:
            root = self.checkpoint_root()
            output_dir = root / f"checkpoint_{config.iteration}"
            if self.state.is_main_process:
                root.mkdir(parents=True, exist_ok=True)
                layout.sweep(root)
                if Path(output_dir).exists():
                    raise CheckpointError(
                        f"checkpoint {output_dir} already exists: set ProjectConfiguration(iteration=...) past it"
                    )
        elif output_dir is None:
            raise ValueError(
                "save_state needs output_dir (or ProjectConfiguration(automatic_checkpoint_naming=True))"
            )
        self.backend.wait_for_everyone()
        prune = None
        if (
            config.automatic_checkpoint_naming
            and config.total_limit is not None
            and self.state.is_main_process
        ):
            prune = partial(self._prune, self.checkpoint_root(), config.total_limit)
        if async_save and async_writer.supports_async(self.backend):
            path = async_writer.save_async(
                self, Path(output_dir), safe_serialization, meta or {}, after=prune
            )
        else:
            if async_save:
                logger.warning(
                    f"the {type(self.backend).__name__} backend writes its own checkpoint files: "
                    "saving synchronously"
                )
            path = self._write_atomically(Path(output_dir), safe_serialization, meta or {})
            if prune is not None:
                prune()
        config.iteration += 1
        logger.info(f"saved state to {path}")
        return path

    @staticmethod
    def _prune(root: Path, total_limit: int) -> None:
        """Remove all but the newest ``total_limit`` checkpoints (once the new one is complete:
        a failed save loses nothing)."""
        existing = layout.list_checkpoints(root)
        for old in existing[: max(len(existing) - total_limit, 0)]:
            layout.remove_checkpoint(old)

    def load_state(
        self,
        input_dir: str | os.PathLike | None = None,
        weights_only: bool = True,
        strict: bool = True,
    ) -> dict[str, Any]:
        """Restore a :meth:`save_state` checkpoint (the newest one when ``input_dir`` is None and
        naming is automatic); returns the ``meta`` it was saved with."""
        self.async_writer.wait()
        config = self.project_configuration
        if input_dir is None:
            if not config.automatic_checkpoint_naming:
                raise ValueError(
                    "load_state needs input_dir (or ProjectConfiguration(automatic_checkpoint_naming=True))"
                )
            input_dir = self.latest_checkpoint()
            if input_dir is None:
                raise CheckpointError(
                    f"no complete checkpoint_N directory in {self.checkpoint_root()}"
                )
        else:
            problems = manifest.problems(input_dir)
            if problems:
                raise CheckpointError(
                    f"checkpoint {input_dir} is incomplete: " + "; ".join(problems[:5])
                )
        meta = self._read(Path(input_dir), weights_only, strict)
        match = layout.CHECKPOINT_PATTERN.match(Path(input_dir).name)
        if config.automatic_checkpoint_naming and match:
            config.iteration = int(match.group(1)) + 1
        logger.info(f"loaded state from {input_dir}")
        return meta

    def latest_checkpoint(self) -> Path | None:
        """The newest ``checkpoint_N`` under :meth:`checkpoint_root` that is complete on every process.

        Incomplete ones (their files do not match their manifest) are skipped with a warning
        naming them. Every process computes what it sees and all agree on the newest
        checkpoint complete everywhere (a node-local disk may lag behind).
        """
        complete: list[str] = []
        for path in layout.list_checkpoints(self.checkpoint_root()):
            problems = manifest.problems(path)
            if problems:
                logger.warning(f"skipping incomplete checkpoint {path}: {problems[0]}")
            else:
                complete.append(path.name)
        if self.state.num_processes > 1:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                everyone: list[list[str]] = [[] for _ in range(self.state.num_processes)]
                dist.all_gather_object(everyone, complete)
                common = set(everyone[0]).intersection(*everyone[1:])
                complete = [name for name in complete if name in common]
        if not complete:
            return None
        return self.checkpoint_root() / complete[-1]

    # -- the files ----------------------------------------------------------------
    def _write_atomically(
        self, final: Path, safe_serialization: bool, meta: Mapping[str, object]
    ) -> Path:
        tmp = layout.temporary_dir(final)
        from accel.distributed.operations import broadcast_object_list

        # a process given its own directory (not the main one's) stages and moves it itself
        main_final = broadcast_object_list([os.fspath(final.resolve())])[0]
        main = self.state.is_main_process or os.fspath(final.resolve()) != main_final
        if main:
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir(parents=True)
        self.backend.wait_for_everyone()
        try:
            self._write(tmp, safe_serialization, meta)
            durable.sync_tree(tmp)  # on every process, before the manifest
        except BaseException:
            # a failed save leaves the previous checkpoint as it was, and no half-written copy
            if main:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.backend.wait_for_everyone()
        if main:
            manifest.write_manifest(tmp, self.state.num_processes)
            layout.replace_dir(tmp, final)
        self.backend.wait_for_everyone()
        return final

    def _write(self, tmp: Path, safe_serialization: bool, meta: Mapping[str, object]) -> None:
        prepared, backend, main = self.prepared, self.backend, self.state.is_main_process
        models = list(prepared.models)
        parts: list[Callable[[], object]] = []  # the models and optimizers: one bar step each
        if self.save_state_pre_hooks:
            # Hooks see (and may pop) full state dicts, then what is left is written.
            weights = [backend.get_state_dict(m, unwrap=True) for m in models]
            for hook in self.save_state_pre_hooks.values():
                hook(models, weights, str(tmp))
            if main:
                for index, state_dict in enumerate(weights):
                    parts.append(
                        partial(
                            layout.write_model_weights, state_dict, tmp, index, safe_serialization
                        )
                    )
        else:
            for index, model in enumerate(models):
                parts.append(
                    partial(backend.save_model_state, model, tmp, index, safe_serialization)
                )
        for index, optimizer in enumerate(prepared.optimizers):
            model_of = prepared.model_for_optimizer(index)
            parts.append(partial(backend.save_optimizer_state, optimizer, tmp, index, model_of))
        large = _state_bytes(models, prepared.optimizers) >= PROGRESS_MIN_BYTES
        for part in progress_bar(parts, "Saving state", unit="part") if large else parts:
            part()
        if main:
            for index, scheduler in enumerate(prepared.schedulers):
                layout.write_object(scheduler.state_dict(), layout.scheduler_file(tmp, index))
            scaler_state = self.precision.state_dict()
            if scaler_state is not None:
                layout.write_object(scaler_state, tmp / layout.SCALER_NAME)
            for index, obj in enumerate(prepared.custom_objects):
                layout.write_object(obj.state_dict(), layout.custom_object_file(tmp, index))
            (tmp / layout.META_NAME).write_text(json.dumps({**meta, "format": 1}))
        # every process its own loaders' positions (a rank may have its own directory)
        rank = self.state.process_index
        for index, dataloader in enumerate(prepared.dataloaders):
            if hasattr(dataloader, "state_dict"):
                # a stateful loader's state_dict() is torchdata's alone: save accel's position
                position = getattr(dataloader, "position_state_dict", dataloader.state_dict)
                layout.write_object(position(), layout.dataloader_file(tmp, index, rank))
        layout.write_object(capture_rng_state(), layout.rng_state_file(tmp, rank))

    def _read(self, folder: Path, weights_only: bool, strict: bool) -> dict[str, Any]:
        if not folder.is_dir():
            raise CheckpointError(f"checkpoint directory {folder} does not exist")
        prepared, backend = self.prepared, self.backend
        models = list(prepared.models)
        for hook in self.load_state_pre_hooks.values():
            hook(models, str(folder))
        parts: list[Callable[[], object]] = [  # the models and optimizers: one bar step each
            partial(
                backend.load_model_state, m, folder, i, strict=strict, weights_only=weights_only
            )
            for i, m in enumerate(models)
        ]
        for index, optimizer in enumerate(prepared.optimizers):
            model_of = prepared.model_for_optimizer(index)
            parts.append(
                partial(
                    backend.load_optimizer_state,
                    optimizer,
                    folder,
                    index,
                    model_of,
                    weights_only=weights_only,
                )
            )
        for part in (
            progress_bar(parts, "Loading state", unit="part") if _is_large(folder) else parts
        ):
            part()
        for index, scheduler in enumerate(prepared.schedulers):
            scheduler.load_state_dict(
                layout.read_object(layout.scheduler_file(folder, index), weights_only)
            )
        saved = manifest.read_manifest(folder) or {}
        saved_n = saved.get("world_size")
        rank = self.state.process_index
        self.last_resume = {"num_processes": saved_n, "positions": []}
        for index, dataloader in enumerate(prepared.dataloaders):
            # a position is global: a rank the saving run did not have reads the main one's
            found = [p for p in layout.dataloader_files(folder, index, rank) if p.exists()]
            if found and hasattr(dataloader, "load_state_dict"):
                position = layout.read_object(found[0], weights_only)
                if isinstance(position, dict):
                    position = positions.upgrade(cast(positions.Position, position), saved_n)
                    self.last_resume["positions"].append(position)
                dataloader.load_state_dict(position)
        if (folder / layout.SCALER_NAME).exists():
            self.precision.load_state_dict(
                layout.read_object(folder / layout.SCALER_NAME, weights_only)
            )
        for index, obj in enumerate(prepared.custom_objects):
            path = layout.custom_object_file(folder, index)
            legacy = folder / f"{layout.CUSTOM_NAME}.pkl"  # the name accel 0.1.0 gave object 0
            if index == 0 and not path.exists() and legacy.exists():
                path = legacy
            obj.load_state_dict(layout.read_object(path, weights_only))
        meta_path = folder / layout.META_NAME
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        rng_path = layout.rng_state_file(folder, rank)
        if rng_path.exists():
            restore_rng_state(layout.read_object(rng_path, weights_only))
        elif saved_n and rank >= saved_n and layout.rng_state_file(folder, 0).exists():
            # a rank the saving run did not have: states of its own, the same at every resume
            main_rng = layout.read_object(layout.rng_state_file(folder, 0), weights_only)
            step = int(meta.get("gradient_step", meta.get("step", 0)) or 0)
            set_seed(derived_seed(main_rng["torch"], rank, step))
        return meta
