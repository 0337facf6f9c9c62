"""Accelerate's FSDP checkpoint functions: what transformers' Trainer saves and resumes with.

:func:`save_fsdp_model` / :func:`load_fsdp_model` / :func:`save_fsdp_optimizer` /
:func:`load_fsdp_optimizer` write and read Accelerate's files, chosen by the plugin's
``state_dict_type``:

============================  ===============================  ==============================
``state_dict_type``           model (index 0 / ``i``)          optimizer (index 0 / ``i``)
============================  ===============================  ==============================
``FULL_STATE_DICT``           ``pytorch_model_fsdp.bin`` /     ``optimizer.bin`` /
                              ``pytorch_model_fsdp_<i>.bin``   ``optimizer_<i>.bin``
``SHARDED_STATE_DICT``        ``pytorch_model_fsdp_<i>/`` (DCP) ``optimizer_<i>/`` (DCP)
``LOCAL_STATE_DICT`` (FSDP1)  ``pytorch_model_fsdp[_<i>]_rank<r>.bin``  ``optimizer_<i>/`` (DCP)
============================  ===============================  ==============================

Full files are written by the main process and read by it (the weights are broadcast and
sharded); DCP folders are written by every process and reshard on load, so a run may resume
on another number of processes. ``use_dcp=False`` writes a sharded state as one file per
process instead (``pytorch_model_fsdp_<i>_rank<r>.bin``, ``optimizer_<i>_rank<r>.bin``),
which loads on the same number of processes only. Both FSDP versions go through
``torch.distributed.checkpoint.state_dict``.

``adapter_only=True`` (what Trainer passes) keeps only a PEFT model's adapter weights,
under PEFT's names (``get_peft_model_state_dict``: the adapter name removed); for a model
that is not a PEFT model it changes nothing.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from .constants import FSDP_MODEL_NAME

logger = logging.getLogger(__name__)

OPTIMIZER_NAME = "optimizer"
"""Stem of the optimizer files and folders (Accelerate's ``OPTIMIZER_NAME``)."""


# -- names --------------------------------------------------------------------------------
def _kind(fsdp_plugin: Any) -> str:
    """``FULL_STATE_DICT``, ``SHARDED_STATE_DICT`` or ``LOCAL_STATE_DICT`` (a string or torch's enum)."""
    value = fsdp_plugin.state_dict_type
    return str(getattr(value, "name", value)).upper()


def _version(fsdp_plugin: Any) -> int:
    return int(getattr(fsdp_plugin, "fsdp_version", None) or 2)


def _full_model_file(folder: Path, index: int) -> Path:
    return folder / (f"{FSDP_MODEL_NAME}.bin" if index == 0 else f"{FSDP_MODEL_NAME}_{index}.bin")


def _local_model_file(folder: Path, index: int, rank: int) -> Path:
    stem = FSDP_MODEL_NAME if index == 0 else f"{FSDP_MODEL_NAME}_{index}"
    return folder / f"{stem}_rank{rank}.bin"


def _shard_dir(folder: Path, stem: str, index: int) -> Path:
    """``<folder>/<stem>_<index>``; ``folder`` itself when it is already that folder (as Accelerate)."""
    name = f"{stem}_{index}"
    return folder if folder.name == name else folder / name


def _full_optimizer_file(folder: Path, index: int) -> Path:
    return folder / (f"{OPTIMIZER_NAME}.bin" if index == 0 else f"{OPTIMIZER_NAME}_{index}.bin")


# -- PEFT ----------------------------------------------------------------------------------
def _unwrapped(model: Any) -> Any:
    """The user's model inside FSDP1 / DDP-like wrappers and compilation."""
    model = getattr(model, "_orig_mod", model)
    while hasattr(model, "module") and type(model).__name__ in (
        "FullyShardedDataParallel",
        "DistributedDataParallel",
        "DataParallel",
    ):
        model = model.module
    return getattr(model, "_orig_mod", model)


def _peft_model(model: Any) -> Any:
    """The PEFT model inside ``model``'s wrappers, or None (PEFT is imported only if it already is)."""
    import sys

    if "peft" not in sys.modules:
        return None  # no PEFT model can exist
    from peft import PeftModel

    inner = _unwrapped(model)
    return inner if isinstance(inner, PeftModel) else None


_WRAPPER_SEGMENTS = frozenset({"_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod"})


class _PlainNames:
    """``model`` as PEFT's key selection should see it: module names without the segments
    FSDP1 units, activation checkpointing and compilation insert (PEFT strips only a
    leading ``_fsdp_wrapped_module.``), so they match the state dict's keys."""

    def __init__(self, model: Any) -> None:
        self._model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def named_modules(self, *args: Any, **kwargs: Any) -> Any:
        """The model's submodules under their names without wrapper segments."""
        for name, module in self._model.named_modules(*args, **kwargs):
            yield ".".join(p for p in name.split(".") if p not in _WRAPPER_SEGMENTS), module


def _adapter_keys(peft_model: Any, state: dict[str, Any]) -> dict[str, str]:
    """PEFT's adapter name for each adapter entry of ``state``: ``{peft_key: state_key}``.

    PEFT chooses the entries and renames them (``get_peft_model_state_dict``); its result
    holds the very tensors of ``state``, which tell which key each came from.
    """
    from peft import get_peft_model_state_dict

    key_of = {id(value): key for key, value in state.items()}
    chosen = get_peft_model_state_dict(
        _PlainNames(peft_model), state_dict=state, adapter_name=peft_model.active_adapter
    )
    found = {name: key_of.get(id(value)) for name, value in chosen.items()}
    lost = sorted(name for name, key in found.items() if key is None)
    if lost:
        raise ValueError(
            f"cannot tell which model weights PEFT's adapter entries {lost[:5]} come from "
            "(the adapter transforms them): save with adapter_only=False"
        )
    return {name: key for name, key in found.items() if key is not None}


# -- state dicts ---------------------------------------------------------------------------
def _options(**kwargs: Any) -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(**kwargs)


def _local(value: Any) -> Any:
    """The part of a DTensor (FSDP2) or ShardedTensor (FSDP1) this process holds."""
    if hasattr(value, "to_local"):
        return value.to_local()
    if hasattr(value, "local_tensor"):
        return value.local_tensor()
    return value


def _local_tree(value: Any) -> Any:
    """``value`` (nested dicts and lists) with each sharded tensor replaced by this process's part."""
    if isinstance(value, dict):
        return {key: _local_tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_local_tree(item) for item in value]
    local = _local(value)
    return local.detach().cpu().clone() if hasattr(local, "detach") else local


def _restore(target: Any, saved: Any) -> Any:
    """``target`` with what :func:`_local_tree` saved copied in (tensors in place)."""
    import torch

    if isinstance(target, dict) and isinstance(saved, dict):
        return {
            key: _restore(item, saved[key]) if key in saved else item
            for key, item in target.items()
        }
    if isinstance(target, list) and isinstance(saved, list) and len(target) == len(saved):
        return [_restore(item, value) for item, value in zip(target, saved)]
    local = _local(target)
    if isinstance(local, torch.Tensor) and isinstance(saved, torch.Tensor):
        with torch.no_grad():
            local.copy_(saved)
        return target
    return saved


def _full_model_state(model: Any) -> dict[str, Any]:
    """The full state dict on the main process (on the CPU); empty on the others."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return get_model_state_dict(model, options=_options(full_state_dict=True, cpu_offload=True))


def _set_full_model_state(model: Any, state: dict[str, Any], strict: bool = True) -> Any:
    """Load a full state dict given on the main process: broadcast, each process keeps its shard."""
    from torch.distributed.checkpoint.state_dict import set_model_state_dict

    return set_model_state_dict(
        model,
        state,
        options=_options(full_state_dict=True, broadcast_from_rank0=True, strict=strict),
    )


def _sharded_model_state(model: Any) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return get_model_state_dict(model)


def _local_state(model: Any, load: dict[str, Any] | None = None) -> Any:
    """FSDP1 LOCAL_STATE_DICT of ``model`` (this process's flat shards, ``..._flat_param``;
    plain weights on one process, where FSDP1 does not shard); with ``load``, load that
    one instead and return the missing and unexpected keys."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import StateDictType

    with FSDP.state_dict_type(model, StateDictType.LOCAL_STATE_DICT):
        return model.state_dict() if load is None else model.load_state_dict(load)


def _dcp_model_names(folder: Path) -> set[str]:
    """The names under ``"model"`` in the DCP checkpoint ``folder`` (read from its metadata)."""
    from accel.checkpoint.dcp_files import RawReader

    metadata = RawReader(str(folder)).read_metadata()
    paths = getattr(metadata, "planner_data", None) or {}
    if paths:
        return {path[1] for path in paths.values() if len(path) == 2 and path[0] == "model"}
    return {
        key[len("model.") :] for key in metadata.state_dict_metadata if key.startswith("model.")
    }


def _incompatible(missing: list[str], unexpected: list[str]) -> Any:
    from torch.nn.modules.module import _IncompatibleKeys

    return _IncompatibleKeys(missing, unexpected)


# -- model ---------------------------------------------------------------------------------
def save_fsdp_model(
    fsdp_plugin: Any,
    accelerator: Any,
    model: Any,
    output_dir: str | os.PathLike,
    model_index: int = 0,
    adapter_only: bool = False,
    use_dcp: bool = True,
) -> None:
    """Save the FSDP ``model`` into ``output_dir`` as ``fsdp_plugin.state_dict_type`` says.

    Every process must call it. ``FULL_STATE_DICT``: the main process writes
    ``pytorch_model_fsdp.bin`` (``pytorch_model_fsdp_<model_index>.bin``);
    ``SHARDED_STATE_DICT``: every process writes its shards into the DCP folder
    ``pytorch_model_fsdp_<model_index>/`` (per-process ``.bin`` files with ``use_dcp=False``);
    ``LOCAL_STATE_DICT`` (FSDP1): ``pytorch_model_fsdp_rank<r>.bin`` per process.
    ``adapter_only``: only a PEFT model's adapter weights, under PEFT's names.
    """
    from accel.checkpoint.layout import write_object

    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    kind = _kind(fsdp_plugin)
    peft_model = _peft_model(model) if adapter_only else None
    rank = accelerator.process_index
    if kind == "FULL_STATE_DICT":
        state = _full_model_state(model)
        if rank == 0:
            if peft_model is not None:
                state = {name: state[key] for name, key in _adapter_keys(peft_model, state).items()}
            path = _full_model_file(folder, model_index)
            logger.info("Saving model to %s", path)
            write_object(state, path)
    elif (
        kind == "LOCAL_STATE_DICT"
    ):  # the flat shards hold every weight: adapter_only does not apply
        write_object(_local_tree(_local_state(model)), _local_model_file(folder, model_index, rank))
    else:
        state = _sharded_model_state(model)
        if peft_model is not None:
            state = {name: state[key] for name, key in _adapter_keys(peft_model, state).items()}
        if use_dcp:
            from . import dcp_io

            target = _shard_dir(folder, FSDP_MODEL_NAME, model_index)
            logger.info("Saving model to %s", target)
            dcp_io.save_or_stage({"model": state}, target)
        else:
            write_object(
                _local_tree(state),
                folder / f"{FSDP_MODEL_NAME}_{model_index}_rank{rank}.bin",
            )
    accelerator.wait_for_everyone()


def load_fsdp_model(
    fsdp_plugin: Any,
    accelerator: Any,
    model: Any,
    input_dir: str | os.PathLike,
    model_index: int = 0,
    adapter_only: bool = False,
    use_dcp: bool = True,
) -> Any:
    """Load what :func:`save_fsdp_model` wrote in ``input_dir`` into the FSDP ``model``.

    Every process must call it. Returns the missing and unexpected keys (``_IncompatibleKeys``).
    With ``adapter_only`` only adapter weights count, under PEFT's names: missing, the model's
    adapter entries the checkpoint lacks (they keep their values); unexpected, the checkpoint's
    entries that are not (Accelerate's ``missing_keys`` also lists every base weight). With
    ``FULL_STATE_DICT`` the main process reports them, the others none. A full file is read by the main
    process and broadcast; a DCP folder reshards to the current number of processes
    (``input_dir`` may be the checkpoint folder or the ``pytorch_model_fsdp_<i>`` folder).
    """
    from accel.checkpoint.layout import read_object

    accelerator.wait_for_everyone()
    folder = Path(input_dir)
    kind = _kind(fsdp_plugin)
    peft_model = _peft_model(model) if adapter_only else None
    rank = accelerator.process_index
    if kind == "FULL_STATE_DICT":
        path = _full_model_file(folder, model_index)
        if peft_model is None:
            state = read_object(path) if rank == 0 else {}
            result = _set_full_model_state(model, state)
        else:  # the adapter's entries replace the model's own on the main process, then all load
            state = _full_model_state(model)
            missing: list[str] = []
            unexpected: list[str] = []
            if rank == 0:
                saved = read_object(path)
                keys = _adapter_keys(peft_model, state)
                unexpected = sorted(set(saved) - set(keys))
                missing = sorted(set(keys) - set(saved))
                for name, key in keys.items():
                    if name in saved:
                        state[key] = saved[name]
            _set_full_model_state(model, state)
            result = _incompatible(missing, unexpected)
    elif kind == "LOCAL_STATE_DICT":
        from accel.errors import CheckpointError

        path = _local_model_file(folder, model_index, rank)
        if not path.exists():
            raise CheckpointError(
                f"{path} is missing: a LOCAL_STATE_DICT checkpoint loads only on the number of "
                "processes that saved it; save with state_dict_type=SHARDED_STATE_DICT to resume "
                "on another number of processes"
            )
        state = _restore(_local_state(model), read_object(path))  # copied in place
        if any(key.endswith("_flat_param") for key in state):
            result = _incompatible([], [])  # the shards were views of the flat parameters
        else:  # one process: FSDP1 does not shard, its local state dict holds copies
            result = _local_state(model, load=state)
    else:
        from torch.distributed.checkpoint.state_dict import set_model_state_dict

        state = _sharded_model_state(model)
        keys = (
            _adapter_keys(peft_model, state)
            if peft_model is not None
            else {key: key for key in state}
        )
        wanted = {name: state[key] for name, key in keys.items()}
        if use_dcp:
            from accel.checkpoint import dcp_files

            target = _shard_dir(folder, FSDP_MODEL_NAME, model_index)
            logger.info("Loading model from %s", target)
            stored = _dcp_model_names(target) if peft_model is not None else set(wanted)
            loaded = {"model": {name: value for name, value in wanted.items() if name in stored}}
            dcp_files.load(loaded, target)
            wanted.update(loaded["model"])
        else:
            saved = read_object(folder / f"{FSDP_MODEL_NAME}_{model_index}_rank{rank}.bin")
            stored = set(saved)
            wanted = _restore(wanted, saved)
        for name, key in keys.items():
            state[key] = wanted[name]
        result = set_model_state_dict(model, state)
        if peft_model is not None:  # the adapter entries the model has and the files lack, and back
            result = _incompatible(sorted(set(keys) - stored), sorted(stored - set(keys)))
    accelerator.wait_for_everyone()
    return result


# -- optimizer -----------------------------------------------------------------------------
def _inner(optimizer: Any) -> Any:
    """torch's optimizer inside accel's ``AcceleratedOptimizer``."""
    return getattr(optimizer, "optimizer", optimizer)


def _has_shaped_tensor(value: Any) -> bool:
    """Whether ``value`` (nested dicts and lists) holds a tensor of at least one dimension."""
    if isinstance(value, dict):
        return any(_has_shaped_tensor(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_shaped_tensor(item) for item in value)
    return getattr(value, "ndim", 0) > 0


def set_full_optimizer_state(model: Any, optimizer: Any, state: dict[str, Any], version: int = 2):
    """Load a full optimizer state dict (parameters named by their FQNs) into ``optimizer``.

    torch's full-state loader learns the device to distribute to from the optimizer's own
    per-parameter tensors and fails ("Expected device to be set") on FSDP2 when there are
    none, as with SGD without momentum. Such a state holds nothing to shard: its entries
    (scalars at most) and the param groups' hyperparameters are loaded through the
    optimizer's own ``load_state_dict``, the FQNs translated to the optimizer's indices.
    """
    from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

    if version == 1 or _has_shaped_tensor(state.get("state", {})):
        set_optimizer_state_dict(model, optimizer, state, options=_options(full_state_dict=True))
        return
    current = optimizer.state_dict()["param_groups"]
    saved = state["param_groups"]
    sizes = [len(group["params"]) for group in saved], [len(group["params"]) for group in current]
    if sizes[0] != sizes[1]:
        raise ValueError(
            f"the checkpoint's optimizer has param groups of {sizes[0]} parameters, this one "
            f"{sizes[1]}: create the optimizer over the same parameters as the saved run"
        )
    index = {
        name: number
        for group, mine in zip(saved, current)
        for name, number in zip(group["params"], mine["params"])
    }
    optimizer.load_state_dict(
        {
            "state": {index[name]: entries for name, entries in state.get("state", {}).items()},
            "param_groups": [
                {**group, "params": mine["params"]} for group, mine in zip(saved, current)
            ],
        }
    )


def save_fsdp_optimizer(
    fsdp_plugin: Any,
    accelerator: Any,
    optimizer: Any,
    model: Any,
    output_dir: str | os.PathLike,
    optimizer_index: int = 0,
    use_dcp: bool = True,
) -> None:
    """Save the state of ``optimizer`` (over the FSDP ``model``'s parameters) into ``output_dir``.

    Every process must call it. ``FULL_STATE_DICT``: the main process writes ``optimizer.bin``
    (``optimizer_<optimizer_index>.bin``); otherwise every process writes its shards into the
    DCP folder ``optimizer_<optimizer_index>/`` (per-process ``.bin`` files with ``use_dcp=False``).
    """
    from accel.checkpoint.layout import write_object
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    inner = _inner(optimizer)
    rank = accelerator.process_index
    if _kind(fsdp_plugin) == "FULL_STATE_DICT":
        # From a CPU device "offloading" copies nothing, and FSDP1's gathered states then
        # share one buffer: offload only from accelerators.
        offload = accelerator.device.type != "cpu"
        state = get_optimizer_state_dict(
            model, inner, options=_options(full_state_dict=True, cpu_offload=offload)
        )
        if rank == 0:
            path = _full_optimizer_file(folder, optimizer_index)
            logger.info("Saving optimizer state to %s", path)
            write_object(state, path)
    elif use_dcp:
        from . import dcp_io

        target = _shard_dir(folder, OPTIMIZER_NAME, optimizer_index)
        logger.info("Saving optimizer state to %s", target)
        dcp_io.save_or_stage({"optimizer": get_optimizer_state_dict(model, inner)}, target)
    else:
        write_object(
            _local_tree(get_optimizer_state_dict(model, inner)),
            folder / f"{OPTIMIZER_NAME}_{optimizer_index}_rank{rank}.bin",
        )
    accelerator.wait_for_everyone()


def load_fsdp_optimizer(
    fsdp_plugin: Any,
    accelerator: Any,
    optimizer: Any,
    model: Any,
    input_dir: str | os.PathLike,
    optimizer_index: int = 0,
    adapter_only: bool = False,
    use_dcp: bool = True,
) -> None:
    """Load what :func:`save_fsdp_optimizer` wrote in ``input_dir`` into ``optimizer``.

    Every process must call it; ``model`` is the FSDP model the optimizer updates. A DCP
    folder reshards to the current number of processes. ``adapter_only`` is accepted for
    Accelerate's signature: the optimizer state already covers only trainable parameters.
    """
    from accel.checkpoint.layout import read_object
    from torch.distributed.checkpoint.state_dict import (
        get_optimizer_state_dict,
        set_optimizer_state_dict,
    )

    del adapter_only
    accelerator.wait_for_everyone()
    folder = Path(input_dir)
    inner = _inner(optimizer)
    if _kind(fsdp_plugin) == "FULL_STATE_DICT":
        state = read_object(_full_optimizer_file(folder, optimizer_index))
        set_full_optimizer_state(model, inner, state, _version(fsdp_plugin))
    elif use_dcp:
        import torch.distributed.checkpoint as dcp
        from accel.checkpoint import dcp_files

        target = _shard_dir(folder, OPTIMIZER_NAME, optimizer_index)
        logger.info("Loading optimizer state from %s", target)
        state = {"optimizer": get_optimizer_state_dict(model, inner)}
        # FSDP1's optimizer state holds ShardedTensors; flattening them in the load planner
        # loses the param_groups entry ("Missing key ... optimizer.param_groups").
        planner = dcp.DefaultLoadPlanner(flatten_sharded_tensors=_version(fsdp_plugin) != 1)
        dcp_files.load(state, target, planner=planner)
        set_optimizer_state_dict(model, inner, state["optimizer"])
    else:
        rank = accelerator.process_index
        saved = read_object(folder / f"{OPTIMIZER_NAME}_{optimizer_index}_rank{rank}.bin")
        state = _restore(get_optimizer_state_dict(model, inner), saved)
        set_optimizer_state_dict(model, inner, state)
    accelerator.wait_for_everyone()


__all__ = ["load_fsdp_model", "load_fsdp_optimizer", "save_fsdp_model", "save_fsdp_optimizer"]
