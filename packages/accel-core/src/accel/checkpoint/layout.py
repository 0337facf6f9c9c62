"""The ``save_state`` checkpoint layout: file names, paths, readers and writers.

This is what a backend may use to place its part of a checkpoint (its model weights,
optimizer state) where ``load_state`` looks for it. It knows nothing of the
Accelerator or the backends; the orchestration is :mod:`accel.checkpoint.manager`.

A checkpoint is a directory (Accelerate's layout)::

    model.safetensors, model_1.safetensors, ...     model i (or a sharded folder with an index)
    optimizer.bin, optimizer_1.bin, ...              optimizer i
    scheduler.bin, ...                               scheduler i
    dl_state_dict.bin, dl_state_dict_rank<r>.bin     data loader 0's position on process 0, on process r
    dl_state_dict_1.bin, dl_state_dict_1_rank<r>.bin data loader 1's, ...
    scaler.pt                                        the fp16 loss scaler
    random_states_<rank>.pkl                         each process's RNG states
    custom_checkpoint_<i>.pkl                        object i of register_for_checkpointing
    accel_state.json                                 step counters
    accel_manifest.json                              every file and its size, written last

Every write goes through a temporary name and ``os.replace``; every read uses
safetensors or ``torch.load(weights_only=True)`` unless the caller trusts the file.
Durability: before the manifest is written, every process fsyncs the files and folders of
the checkpoint (:mod:`accel.checkpoint.durable`); the manifest is fsynced with its folder,
and the parent folder after the rename (:func:`replace_dir`), so a checkpoint that has its
manifest after a power loss or a kernel crash has its data on disk too.
"""

from __future__ import annotations

import contextvars
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import torch

from accel.checkpoint.durable import sync_dir
from accel.checkpoint.torch_files import save_without_crc
from accel.checkpoint.weights import (
    SAFE_WEIGHTS_INDEX_NAME,
    WEIGHTS_INDEX_NAME,
    load_weights,
    save_weights,
)
from accel.errors import CheckpointError

MODEL_NAME = "pytorch_model"
"""Stem of model weights saved without safetensors."""
SAFE_MODEL_NAME = "model"
"""Stem of model weights saved with safetensors."""
OPTIMIZER_NAME = "optimizer"
"""Stem of optimizer state files."""
SCHEDULER_NAME = "scheduler"
"""Stem of scheduler state files."""
DATALOADER_NAME = "dl_state_dict"
"""Stem of data-loader position files."""
SCALER_NAME = "scaler.pt"
"""The loss scaler's file."""
RNG_STATE_NAME = "random_states"
"""Stem of the per-process RNG state files."""
CUSTOM_NAME = "custom_checkpoint"
"""Stem of registered objects' files."""
META_NAME = "accel_state.json"
"""The step counters' file."""
CHECKPOINT_PATTERN = re.compile(r"^checkpoint_(\d+)$")
"""Names of automatically named checkpoints (``checkpoint_<iteration>``)."""
R = TypeVar("R")

WRITE_SINK: contextvars.ContextVar[
    Callable[[Callable[..., object], tuple[object, ...]], None] | None
] = contextvars.ContextVar("accel_checkpoint_write_sink", default=None)
"""Set while an asynchronous save stages (:mod:`accel.checkpoint.async_writer`): :func:`write_object`
and :func:`write_model_weights` then hand ``(themselves, their arguments)`` to it instead of writing."""


def indexed_name(name: str, index: int, ext: str) -> str:
    """``name.ext`` for the first object of a kind, ``name_<index>.ext`` for the others."""
    return f"{name}.{ext}" if index == 0 else f"{name}_{index}.{ext}"


def optimizer_file(folder: Path, index: int) -> Path:
    """Where optimizer ``index``'s full state is stored in a checkpoint."""
    return Path(folder) / indexed_name(OPTIMIZER_NAME, index, "bin")


def scheduler_file(folder: Path, index: int) -> Path:
    """Where scheduler ``index``'s state is stored in a checkpoint."""
    return Path(folder) / indexed_name(SCHEDULER_NAME, index, "bin")


def dataloader_file(folder: Path, index: int, process_index: int = 0) -> Path:
    """Where process ``process_index``'s position of data loader ``index`` is stored in a checkpoint.

    The main process's is ``dl_state_dict[_<index>].bin`` (Accelerate's name); another
    process's adds ``_rank<process_index>``, so that every process keeps its own position
    also when all share one directory.
    """
    name = indexed_name(DATALOADER_NAME, index, "bin")
    if process_index:
        name = name.replace(".bin", f"_rank{process_index}.bin")
    return Path(folder) / name


def dataloader_files(folder: Path, index: int, process_index: int) -> list[Path]:
    """Where to read process ``process_index``'s position of data loader ``index``, in order.

    Its own file, then the main process's name: what a checkpoint of an older accel (only
    the main process wrote positions) or of Accelerate (every process writes that name
    into its own directory) holds.
    """
    own = dataloader_file(folder, index, process_index)
    return [own] if process_index == 0 else [own, dataloader_file(folder, index)]


def custom_object_file(folder: Path, index: int) -> Path:
    """Where registered object ``index`` is stored (numbered from 0, as Accelerate does)."""
    return Path(folder) / f"{CUSTOM_NAME}_{index}.pkl"


def rng_state_file(folder: Path, process_index: int) -> Path:
    """Where process ``process_index``'s RNG states are stored."""
    return Path(folder) / f"{RNG_STATE_NAME}_{process_index}.pkl"


def model_file(folder: Path, index: int) -> Path:
    """The file (or sharded folder) holding model ``index``'s weights in a checkpoint.

    Raises :class:`~accel.errors.CheckpointError` if there is none.
    """
    folder = Path(folder)
    for name, ext in ((SAFE_MODEL_NAME, "safetensors"), (MODEL_NAME, "bin")):
        path = folder / indexed_name(name, index, ext)
        if path.exists():
            return path
    sharded = folder if index == 0 else folder / f"{SAFE_MODEL_NAME}_{index}"
    if any((sharded / name).exists() for name in (SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_INDEX_NAME)):
        return sharded
    raise CheckpointError(
        f"{folder} has no weights for model {index} "
        f"(expected {indexed_name(SAFE_MODEL_NAME, index, 'safetensors')})"
    )


def list_checkpoints(folder: str | os.PathLike) -> list[Path]:
    """``checkpoint_N`` directories in ``folder``, oldest (lowest N) first."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [
        (int(m.group(1)), p)
        for p in folder.iterdir()
        if p.is_dir() and (m := CHECKPOINT_PATTERN.match(p.name))
    ]
    return [p for _, p in sorted(found)]


def is_staging() -> bool:
    """Whether an asynchronous save is staging in this context (see :func:`write_or_stage`)."""
    return WRITE_SINK.get() is not None


def write_or_stage(function: Callable[..., R], *args: object) -> R | None:
    """Call ``function(*args)``, or hand it to the asynchronous save that is staging.

    For a backend that writes its own checkpoint files (e.g. with
    ``torch.distributed.checkpoint``) and wants ``save_state(..., async_save=True)``: while
    an asynchronous save stages (:data:`WRITE_SINK` is set), the tensors in ``args``
    (plain tensors, in dicts, lists and tuples: pass a DTensor's local tensor) are copied,
    the prepared optimizers' parameters and state before their next ``step``, and
    ``function`` runs later in the background writer thread, with the copies, before the
    checkpoint is finished (manifest, rename). ``function`` must not run a collective on a
    process group the training loop uses. Otherwise it runs now; docs/plugins.md.
    """
    sink = WRITE_SINK.get()
    if sink is None:
        return function(*args)
    return sink(function, args)


def write_object(obj: object, path: Path) -> None:
    """``torch.save`` to ``path`` through a temporary file (no zip CRCs: ``torch_files``)."""
    sink = WRITE_SINK.get()
    if sink is not None:
        return sink(write_object, (obj, path))
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    save_without_crc(obj, tmp)
    os.replace(tmp, path)


def read_object(path: Path, weights_only: bool = True) -> Any:  # torch.load's: what was pickled
    """``torch.load`` on the CPU with ``weights_only``.

    A pickle that ``weights_only`` refuses (it could run code) raises
    :class:`~accel.errors.CheckpointError` saying how to load a trusted file.
    """
    try:
        return torch.load(path, map_location="cpu", weights_only=weights_only)
    except Exception as exc:
        if weights_only and "weights_only" in str(exc):
            raise CheckpointError(
                f"{path} holds objects that torch.load(weights_only=True) refuses to unpickle (it could run code). "
                "If you wrote this checkpoint yourself and trust it, pass load_state(..., weights_only=False)."
            ) from None
        raise


def write_model_weights(
    state_dict: dict[str, torch.Tensor], folder: Path, index: int, safe_serialization: bool = True
) -> None:
    """Write model ``index``'s full state dict into a checkpoint ``folder`` (call on the main process)."""
    sink = WRITE_SINK.get()
    if sink is not None:
        return sink(write_model_weights, (state_dict, folder, index, safe_serialization))
    folder = Path(folder)
    name = SAFE_MODEL_NAME if safe_serialization else MODEL_NAME
    target = folder if index == 0 else folder / f"{name}_{index}"
    files = save_weights(
        state_dict, target, max_shard_size="10GB", safe_serialization=safe_serialization
    )
    if index > 0 and len(files) == 1:
        # Accelerate's layout: model_1.safetensors beside model.safetensors
        (target / files[0]).rename(
            folder / indexed_name(name, index, "safetensors" if safe_serialization else "bin")
        )
        shutil.rmtree(target)


def read_model_weights(
    folder: Path, index: int, weights_only: bool = True
) -> dict[str, torch.Tensor]:
    """Read model ``index``'s full state dict from a checkpoint ``folder``."""
    path = model_file(folder, index)
    if path.is_dir() or path.suffix == ".safetensors":
        return load_weights(path)
    return read_object(path, weights_only)


def temporary_dir(final: Path) -> Path:
    """The name a checkpoint is written under before :func:`replace_dir` moves it to ``final``."""
    final = Path(final)
    return final.with_name(final.name + ".accel-tmp")


def replace_dir(tmp: Path, final: Path) -> None:
    """Move the complete directory ``tmp`` to ``final``, replacing any previous ``final``.

    The old directory is renamed aside before the new one takes its name, so at any
    moment ``final`` is either the old or the new checkpoint, never a mix. The parent folder
    is fsynced after the rename, so the new name survives a crash.
    """
    tmp, final = Path(tmp), Path(final)
    if final.exists():
        old = final.with_name(final.name + ".accel-old")
        if old.exists():
            shutil.rmtree(old)
        os.replace(final, old)
        os.replace(tmp, final)
        sync_dir(final.parent)
        shutil.rmtree(old)
    else:
        os.replace(tmp, final)
        sync_dir(final.parent)


DELETING_SUFFIX = ".accel-deleting"
"""Suffix a checkpoint is renamed to before it is deleted (never mistaken for a checkpoint)."""


def remove_checkpoint(path: Path) -> None:
    """Delete checkpoint ``path`` atomically: rename it out of the way, then remove it.

    A process killed while deleting leaves ``<name>.accel-deleting``, never a half-deleted
    folder under the checkpoint's real name; :func:`sweep` removes such leftovers.
    """
    path = Path(path)
    doomed = path.with_name(path.name + DELETING_SUFFIX)
    if doomed.exists():
        shutil.rmtree(doomed, ignore_errors=True)
    os.replace(path, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def sweep(folder: str | os.PathLike) -> list[Path]:
    """Remove what interrupted saves and deletions left in ``folder``; returns what was removed."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = []
    for path in sorted(folder.iterdir()):
        if not path.is_dir():
            continue
        if path.name.endswith(".accel-old"):
            original = path.with_name(path.name[: -len(".accel-old")])
            if not original.exists():  # killed between the two renames of replace_dir
                os.replace(path, original)
                continue
        if path.name.endswith((DELETING_SUFFIX, ".accel-tmp", ".accel-old")):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
