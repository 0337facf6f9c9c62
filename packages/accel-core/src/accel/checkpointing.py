"""``save_state`` / ``load_state``: the whole training state, written atomically, read safely.

A checkpoint is a directory. It is first written under a temporary name next to
its destination and renamed into place once complete, so a crash never leaves a
half-written checkpoint under the real name. Everything is read back with
safetensors or ``torch.load(weights_only=True)``: a pickle carrying code is refused.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .errors import CheckpointError
from .utils.modeling import SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_INDEX_NAME, load_weights, save_weights
from .utils.random import capture_rng_state, restore_rng_state

if TYPE_CHECKING:
    from .accelerator import Accelerator

MODEL_NAME = "pytorch_model"
SAFE_MODEL_NAME = "model"
OPTIMIZER_NAME = "optimizer"
SCHEDULER_NAME = "scheduler"
DATALOADER_NAME = "dl_state_dict"
SCALER_NAME = "scaler.pt"
RNG_STATE_NAME = "random_states"
CUSTOM_NAME = "custom_checkpoint"
META_NAME = "accel_state.json"
CHECKPOINT_PATTERN = re.compile(r"^checkpoint_(\d+)$")


def _indexed(name: str, index: int, ext: str) -> str:
    return f"{name}.{ext}" if index == 0 else f"{name}_{index}.{ext}"


def _custom_name(index: int) -> str:
    # Accelerate's layout numbers every registered object, the first one included
    return f"{CUSTOM_NAME}_{index}.pkl"


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


def _safe_load(path: Path, weights_only: bool = True) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=weights_only)
    except Exception as exc:
        if weights_only and "weights_only" in str(exc):
            raise CheckpointError(
                f"{path} holds objects that torch.load(weights_only=True) refuses to unpickle (it could run code). "
                "If you wrote this checkpoint yourself and trust it, pass load_state(..., weights_only=False)."
            ) from None
        raise


def _atomic_save(obj: Any, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def save_accelerator_state(
    accelerator: Accelerator, output_dir: str | os.PathLike, safe_serialization: bool = True
) -> Path:
    """Write models, optimizers, schedulers, data-loader positions, scaler, RNG and registered objects."""
    final = Path(output_dir)
    tmp = final.with_name(final.name + ".accel-tmp")
    if accelerator.is_main_process:
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()

    try:
        _write_state(accelerator, tmp, safe_serialization)
    except BaseException:
        # a failed save leaves the previous checkpoint as it was, and no half-written copy
        if accelerator.is_main_process:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        _replace_dir(tmp, final)
    accelerator.wait_for_everyone()
    return final


def _write_state(accelerator: Accelerator, tmp: Path, safe_serialization: bool) -> None:
    """Write every file of a checkpoint into the temporary directory ``tmp``."""
    state = accelerator.state
    backend = accelerator.backend
    models = list(accelerator._models)
    if accelerator._save_model_state_pre_hook:
        # Hooks see (and may pop) full state dicts, then what is left is written.
        weights = [backend.get_state_dict(m, unwrap=True) for m in models]
        for hook in accelerator._save_model_state_pre_hook.values():
            hook(models, weights, str(tmp))
        if accelerator.is_main_process:
            for index, state_dict in enumerate(weights):
                write_model_weights(state_dict, tmp, index, safe_serialization)
    else:
        for index, model in enumerate(models):
            backend.save_model_state(model, tmp, index, safe_serialization)
    for index, optimizer in enumerate(accelerator._optimizers):
        backend.save_optimizer_state(
            optimizer, tmp, index, models[index] if index < len(models) else None
        )
    if accelerator.is_main_process:
        for index, scheduler in enumerate(accelerator._schedulers):
            _atomic_save(scheduler.state_dict(), tmp / _indexed(SCHEDULER_NAME, index, "bin"))
        for index, dataloader in enumerate(accelerator._dataloaders):
            if hasattr(dataloader, "state_dict"):
                _atomic_save(dataloader.state_dict(), tmp / _indexed(DATALOADER_NAME, index, "bin"))
        scaler_state = accelerator.precision.state_dict()
        if scaler_state is not None:
            _atomic_save(scaler_state, tmp / SCALER_NAME)
        for index, obj in enumerate(accelerator._custom_objects):
            _atomic_save(obj.state_dict(), tmp / _custom_name(index))
        meta = {
            "step": accelerator.step,
            "gradient_step": accelerator.gradient_state.step,
            "format": 1,
        }
        (tmp / META_NAME).write_text(json.dumps(meta))
    _atomic_save(capture_rng_state(), tmp / f"{RNG_STATE_NAME}_{state.process_index}.pkl")


def _replace_dir(tmp: Path, final: Path) -> None:
    if final.exists():
        old = final.with_name(final.name + ".accel-old")
        if old.exists():
            shutil.rmtree(old)
        os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old)
    else:
        os.replace(tmp, final)


def load_accelerator_state(
    accelerator: Accelerator,
    input_dir: str | os.PathLike,
    weights_only: bool = True,
    strict: bool = True,
) -> dict[str, Any]:
    """Restore what :func:`save_accelerator_state` wrote; returns the saved metadata."""
    folder = Path(input_dir)
    if not folder.is_dir():
        raise CheckpointError(f"checkpoint directory {folder} does not exist")
    backend = accelerator.backend
    models = list(accelerator._models)
    for hook in accelerator._load_model_state_pre_hook.values():
        hook(models, str(folder))
    for index, model in enumerate(models):
        backend.load_model_state(model, folder, index, strict=strict, weights_only=weights_only)
    for index, optimizer in enumerate(accelerator._optimizers):
        model = accelerator._models[index] if index < len(accelerator._models) else None
        backend.load_optimizer_state(optimizer, folder, index, model, weights_only=weights_only)
    for index, scheduler in enumerate(accelerator._schedulers):
        scheduler.load_state_dict(
            _safe_load(folder / _indexed(SCHEDULER_NAME, index, "bin"), weights_only)
        )
    for index, dataloader in enumerate(accelerator._dataloaders):
        path = folder / _indexed(DATALOADER_NAME, index, "bin")
        if path.exists() and hasattr(dataloader, "load_state_dict"):
            dataloader.load_state_dict(_safe_load(path, weights_only))
    if (folder / SCALER_NAME).exists():
        accelerator.precision.load_state_dict(_safe_load(folder / SCALER_NAME, weights_only))
    for index, obj in enumerate(accelerator._custom_objects):
        path = folder / _custom_name(index)
        if index == 0 and not path.exists() and (folder / f"{CUSTOM_NAME}.pkl").exists():
            path = folder / f"{CUSTOM_NAME}.pkl"  # the name accel 0.1.0 wrote for the first object
        obj.load_state_dict(_safe_load(path, weights_only))
    rng_path = folder / f"{RNG_STATE_NAME}_{accelerator.process_index}.pkl"
    if rng_path.exists():
        restore_rng_state(_safe_load(rng_path, weights_only))
    meta_path = folder / META_NAME
    return json.loads(meta_path.read_text()) if meta_path.exists() else {}


def write_model_weights(
    state_dict: dict[str, Any], folder: Path, index: int, safe_serialization: bool = True
) -> None:
    """Write model ``index``'s full state dict into a checkpoint ``folder`` (main process only)."""
    name = SAFE_MODEL_NAME if safe_serialization else MODEL_NAME
    target = folder if index == 0 else folder / f"{name}_{index}"
    files = save_weights(
        state_dict, target, max_shard_size="10GB", safe_serialization=safe_serialization
    )
    if (
        index > 0 and len(files) == 1
    ):  # Accelerate's layout: model_1.safetensors beside model.safetensors
        (target / files[0]).rename(
            folder / _indexed(name, index, "safetensors" if safe_serialization else "bin")
        )
        shutil.rmtree(target)


def read_model_weights(folder: Path, index: int, weights_only: bool = True) -> dict[str, Any]:
    """Read model ``index``'s full state dict from a checkpoint ``folder``."""
    path = _model_file(folder, index)
    if path.is_dir() or path.suffix == ".safetensors":
        return load_weights(path)
    return _safe_load(path, weights_only)


def write_object(obj: Any, path: Path) -> None:
    """``torch.save`` to ``path`` through a temporary file."""
    _atomic_save(obj, path)


def read_object(path: Path, weights_only: bool = True) -> Any:
    """``torch.load`` with ``weights_only`` (a pickle carrying code raises :class:`CheckpointError`)."""
    return _safe_load(path, weights_only)


def optimizer_file(folder: Path, index: int) -> Path:
    """Where optimizer ``index``'s full state is stored in a checkpoint."""
    return folder / _indexed(OPTIMIZER_NAME, index, "bin")


def _model_file(folder: Path, index: int) -> Path:
    for name, ext in ((SAFE_MODEL_NAME, "safetensors"), (MODEL_NAME, "bin")):
        path = folder / _indexed(name, index, ext)
        if path.exists():
            return path
    sharded = folder if index == 0 else folder / f"{SAFE_MODEL_NAME}_{index}"
    if any((sharded / name).exists() for name in (SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_INDEX_NAME)):
        return sharded
    raise CheckpointError(
        f"{folder} has no weights for model {index} (expected {_indexed(SAFE_MODEL_NAME, index, 'safetensors')})"
    )
