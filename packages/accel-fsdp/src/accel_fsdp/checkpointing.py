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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from .constants import FSDP_MODEL_NAME

if TYPE_CHECKING:
    import torch
    from peft import PeftModel
    from torch import nn
    from torch.distributed.checkpoint.state_dict import (
        OptimizerStateType,
        StateDictOptions,
        ValueType,
    )
    from torch.nn.modules.module import _IncompatibleKeys
    from torch.optim import Optimizer

    from .config import FullyShardedDataParallelPlugin

    ModelState = dict[str, ValueType]
    """A model state dict as torch.distributed.checkpoint's functions take and give it."""

TreeT = TypeVar("TreeT")
"""A state (nested dicts and lists of tensors) whose shape a function keeps."""


class RunHandle(Protocol):
    """What the checkpoint functions use of the ``accelerator`` they receive (as in Accelerate)."""

    @property
    def process_index(self) -> int: ...

    @property
    def device(self) -> torch.device: ...

    def wait_for_everyone(self) -> None: ...


logger = logging.getLogger(__name__)

OPTIMIZER_NAME = "optimizer"
"""Stem of the optimizer files and folders (Accelerate's ``OPTIMIZER_NAME``)."""


# -- names --------------------------------------------------------------------------------
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
def _unwrapped(model: nn.Module) -> nn.Module:
    """The user's model inside FSDP1 / DDP-like wrappers and compilation."""
    from torch import nn

    wrappers = ("FullyShardedDataParallel", "DistributedDataParallel", "DataParallel")
    model = getattr(model, "_orig_mod", model)
    while type(model).__name__ in wrappers and isinstance(
        getattr(model, "module", None), nn.Module
    ):
        model = model.get_submodule("module")
    return getattr(model, "_orig_mod", model)


def _peft_model(model: nn.Module) -> PeftModel | None:
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

    def __init__(self, model: nn.Module) -> None:
        self._model = model

    def __getattr__(self, name: str) -> object:
        return getattr(self._model, name)

    def named_modules(
        self, memo: set[nn.Module] | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, nn.Module]]:
        """The model's submodules under their names without wrapper segments."""
        for name, module in self._model.named_modules(memo, prefix, remove_duplicate):
            yield ".".join(p for p in name.split(".") if p not in _WRAPPER_SEGMENTS), module


def _adapter_keys(peft_model: PeftModel, state: ModelState) -> dict[str, str]:
    """PEFT's adapter name for each adapter entry of ``state``: ``{peft_key: state_key}``.

    PEFT chooses the entries and renames them (``get_peft_model_state_dict``); its result
    holds the very tensors of ``state``, which tell which key each came from.
    """
    from peft import get_peft_model_state_dict

    key_of = {id(value): key for key, value in state.items()}
    # PEFT annotates adapter_name as str; a list (several active adapters) is passed on unchanged
    adapter = peft_model.active_adapter
    chosen = get_peft_model_state_dict(
        _PlainNames(peft_model),
        state_dict=state,
        adapter_name=adapter,  # ty: ignore[invalid-argument-type]
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
def state_dict_options(
    full_state_dict: bool = False,
    cpu_offload: bool = False,
    broadcast_from_rank0: bool = False,
    strict: bool = True,
) -> StateDictOptions:
    """torch's ``StateDictOptions`` for the state dict functions (one place for both callers)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(
        full_state_dict=full_state_dict,
        cpu_offload=cpu_offload,
        broadcast_from_rank0=broadcast_from_rank0,
        strict=strict,
    )


def shard_of(value: TreeT) -> TreeT:
    """The part of a DTensor (FSDP2) or ShardedTensor (FSDP1) this process holds (a tensor:
    a tensor); any other value as it is."""
    for method in ("to_local", "local_tensor"):
        local = getattr(value, method, None)
        if callable(local):
            return cast("TreeT", local())
    return value


def _local_tree(value: TreeT) -> TreeT:
    """``value`` (nested dicts and lists) with each sharded tensor replaced by this process's part."""
    return cast("TreeT", _local_copy(value))


def _local_copy(value: object) -> object:
    import torch

    if isinstance(value, dict):
        return {key: _local_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_local_copy(item) for item in value]
    local = shard_of(value)
    return local.detach().cpu().clone() if isinstance(local, torch.Tensor) else local


def _restore(target: TreeT, saved: object) -> TreeT:
    """``target`` with what :func:`_local_tree` saved copied in (tensors in place)."""
    return cast("TreeT", _copied_in(target, saved))


def _copied_in(target: object, saved: object) -> object:
    import torch

    if isinstance(target, dict) and isinstance(saved, dict):
        return {
            key: _copied_in(item, saved[key]) if key in saved else item
            for key, item in target.items()
        }
    if isinstance(target, list) and isinstance(saved, list) and len(target) == len(saved):
        return [_copied_in(item, value) for item, value in zip(target, saved)]
    local = shard_of(target)
    if isinstance(local, torch.Tensor) and isinstance(saved, torch.Tensor):
        with torch.no_grad():
            local.copy_(saved)
        return target
    return saved


def full_model_state(model: nn.Module) -> ModelState:
    """The full state dict on the main process (on the CPU); empty on the others."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return get_model_state_dict(
        model, options=state_dict_options(full_state_dict=True, cpu_offload=True)
    )


def set_full_model_state(
    model: nn.Module, state: ModelState, strict: bool = True
) -> _IncompatibleKeys:
    """Load a full state dict given on the main process: broadcast, each process keeps its shard."""
    from torch.distributed.checkpoint.state_dict import set_model_state_dict

    return set_model_state_dict(
        model,
        state,
        options=state_dict_options(full_state_dict=True, broadcast_from_rank0=True, strict=strict),
    )


def _sharded_model_state(model: nn.Module) -> ModelState:
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return get_model_state_dict(model)


def local_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """FSDP1 LOCAL_STATE_DICT of ``model``: this process's flat shards (``..._flat_param``,
    ShardedTensors; plain weights on one process, where FSDP1 does not shard)."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import StateDictType

    with FSDP.state_dict_type(model, StateDictType.LOCAL_STATE_DICT):
        return model.state_dict()


def _load_local_state(model: nn.Module, state: dict[str, torch.Tensor]) -> _IncompatibleKeys:
    """Load an FSDP1 LOCAL_STATE_DICT into ``model``; the missing and unexpected keys."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import StateDictType

    with FSDP.state_dict_type(model, StateDictType.LOCAL_STATE_DICT):
        return model.load_state_dict(state)


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


def _incompatible(missing: list[str], unexpected: list[str]) -> _IncompatibleKeys:
    from torch.nn.modules.module import _IncompatibleKeys

    return _IncompatibleKeys(missing, unexpected)


# -- optimizer -----------------------------------------------------------------------------
def _inner(optimizer: Optimizer) -> Optimizer:
    """torch's optimizer inside accel's ``AcceleratedOptimizer``."""
    return getattr(optimizer, "optimizer", optimizer)


def _has_shaped_tensor(value: object) -> bool:
    """Whether ``value`` (nested dicts and lists) holds a tensor of at least one dimension."""
    if isinstance(value, dict):
        return any(_has_shaped_tensor(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_shaped_tensor(item) for item in value)
    return getattr(value, "ndim", 0) > 0


def set_full_optimizer_state(
    model: nn.Module, optimizer: Optimizer, state: OptimizerStateType, version: int = 2
) -> None:
    """Load a full optimizer state dict (parameters named by their FQNs) into ``optimizer``.

    torch's full-state loader learns the device to distribute to from the optimizer's own
    per-parameter tensors and fails ("Expected device to be set") on FSDP2 when there are
    none, as with SGD without momentum. Such a state holds nothing to shard: its entries
    (scalars at most) and the param groups' hyperparameters are loaded through the
    optimizer's own ``load_state_dict``, the FQNs translated to the optimizer's indices.
    """
    from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

    if version == 1 or _has_shaped_tensor(state.get("state", {})):
        set_optimizer_state_dict(
            model, optimizer, state, options=state_dict_options(full_state_dict=True)
        )
        return
    current = optimizer.state_dict()["param_groups"]
    # a full state: its entries and groups name the parameters by their FQNs
    saved = cast("list[dict[str, object]]", state["param_groups"])
    entries = cast("dict[str, object]", state.get("state", {}))
    names = [cast("list[str]", group["params"]) for group in saved]
    sizes = [len(group) for group in names], [len(group["params"]) for group in current]
    if sizes[0] != sizes[1]:
        raise ValueError(
            f"the checkpoint's optimizer has param groups of {sizes[0]} parameters, this one "
            f"{sizes[1]}: create the optimizer over the same parameters as the saved run"
        )
    index = {
        name: number
        for group, mine in zip(names, current)
        for name, number in zip(group, mine["params"])
    }
    optimizer.load_state_dict(
        {
            "state": {index[name]: value for name, value in entries.items()},
            "param_groups": [
                {**group, "params": mine["params"]} for group, mine in zip(saved, current)
            ],
        }
    )


# -- one strategy per state_dict_type ------------------------------------------------------
@dataclass(frozen=True)
class _Call:
    """One save or load by every process: where, which model or optimizer, who calls."""

    folder: Path
    index: int
    rank: int
    use_dcp: bool
    version: int
    offload: bool
    """Whether full optimizer states are gathered to the CPU (not from a CPU device)."""

    def rank_file(self, stem: str) -> Path:
        """``<stem>_<index>_rank<r>.bin``: this process's share without DCP."""
        return self.folder / f"{stem}_{self.index}_rank{self.rank}.bin"


class _Sharded:
    """``SHARDED_STATE_DICT``: every process writes its shards, into a DCP folder (resharded on
    load) or, without DCP, into a file of its own. The base of the other two kinds."""

    def save_model(self, call: _Call, model: nn.Module, peft_model: PeftModel | None) -> None:
        from accel.checkpoint.layout import write_object

        state = _sharded_model_state(model)
        if peft_model is not None:
            state = {name: state[key] for name, key in _adapter_keys(peft_model, state).items()}
        if call.use_dcp:
            from . import dcp_io

            target = _shard_dir(call.folder, FSDP_MODEL_NAME, call.index)
            logger.info("Saving model to %s", target)
            dcp_io.save_or_stage({"model": state}, target)
        else:
            write_object(_local_tree(state), call.rank_file(FSDP_MODEL_NAME))

    def load_model(
        self, call: _Call, model: nn.Module, peft_model: PeftModel | None
    ) -> _IncompatibleKeys:
        from accel.checkpoint.layout import read_object
        from torch.distributed.checkpoint.state_dict import set_model_state_dict

        state = _sharded_model_state(model)
        keys = (
            _adapter_keys(peft_model, state)
            if peft_model is not None
            else {key: key for key in state}
        )
        wanted = {name: state[key] for name, key in keys.items()}
        if call.use_dcp:
            from accel.checkpoint import dcp_files

            target = _shard_dir(call.folder, FSDP_MODEL_NAME, call.index)
            logger.info("Loading model from %s", target)
            stored = _dcp_model_names(target) if peft_model is not None else set(wanted)
            loaded = {"model": {name: value for name, value in wanted.items() if name in stored}}
            dcp_files.load(loaded, target)
            wanted.update(loaded["model"])
        else:
            saved = read_object(call.rank_file(FSDP_MODEL_NAME))
            stored = set(saved)
            wanted = _restore(wanted, saved)
        for name, key in keys.items():
            state[key] = wanted[name]
        result = set_model_state_dict(model, state)
        if peft_model is not None:  # the adapter entries the model has and the files lack, and back
            result = _incompatible(sorted(set(keys) - stored), sorted(stored - set(keys)))
        return result

    def save_optimizer(self, call: _Call, model: nn.Module, optimizer: Optimizer) -> None:
        from accel.checkpoint.layout import write_object
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

        state = get_optimizer_state_dict(model, optimizer)
        if call.use_dcp:
            from . import dcp_io

            target = _shard_dir(call.folder, OPTIMIZER_NAME, call.index)
            logger.info("Saving optimizer state to %s", target)
            dcp_io.save_or_stage({"optimizer": state}, target)
        else:
            write_object(_local_tree(state), call.rank_file(OPTIMIZER_NAME))

    def load_optimizer(self, call: _Call, model: nn.Module, optimizer: Optimizer) -> None:
        from accel.checkpoint.layout import read_object
        from torch.distributed.checkpoint.state_dict import (
            get_optimizer_state_dict,
            set_optimizer_state_dict,
        )

        if call.use_dcp:
            import torch.distributed.checkpoint as dcp
            from accel.checkpoint import dcp_files

            target = _shard_dir(call.folder, OPTIMIZER_NAME, call.index)
            logger.info("Loading optimizer state from %s", target)
            state = {"optimizer": get_optimizer_state_dict(model, optimizer)}
            # FSDP1's optimizer state holds ShardedTensors; flattening them in the load planner
            # loses the param_groups entry ("Missing key ... optimizer.param_groups").
            planner = dcp.DefaultLoadPlanner(flatten_sharded_tensors=call.version != 1)
            dcp_files.load(state, target, planner=planner)
            set_optimizer_state_dict(model, optimizer, state["optimizer"])
        else:
            saved = read_object(call.rank_file(OPTIMIZER_NAME))
            state = _restore(get_optimizer_state_dict(model, optimizer), saved)
            set_optimizer_state_dict(model, optimizer, state)


class _Full(_Sharded):
    """``FULL_STATE_DICT``: the main process writes one file and reads it, then broadcasts."""

    def save_model(self, call: _Call, model: nn.Module, peft_model: PeftModel | None) -> None:
        from accel.checkpoint.layout import write_object

        state = full_model_state(model)
        if call.rank == 0:
            if peft_model is not None:
                state = {name: state[key] for name, key in _adapter_keys(peft_model, state).items()}
            path = _full_model_file(call.folder, call.index)
            logger.info("Saving model to %s", path)
            write_object(state, path)

    def load_model(
        self, call: _Call, model: nn.Module, peft_model: PeftModel | None
    ) -> _IncompatibleKeys:
        from accel.checkpoint.layout import read_object

        path = _full_model_file(call.folder, call.index)
        if peft_model is None:
            return set_full_model_state(model, read_object(path) if call.rank == 0 else {})
        # the adapter's entries replace the model's own on the main process, then all load
        state = full_model_state(model)
        missing: list[str] = []
        unexpected: list[str] = []
        if call.rank == 0:
            saved = read_object(path)
            keys = _adapter_keys(peft_model, state)
            unexpected = sorted(set(saved) - set(keys))
            missing = sorted(set(keys) - set(saved))
            for name, key in keys.items():
                if name in saved:
                    state[key] = saved[name]
        set_full_model_state(model, state)
        return _incompatible(missing, unexpected)

    def save_optimizer(self, call: _Call, model: nn.Module, optimizer: Optimizer) -> None:
        from accel.checkpoint.layout import write_object
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

        options = state_dict_options(full_state_dict=True, cpu_offload=call.offload)
        state = get_optimizer_state_dict(model, optimizer, options=options)
        if call.rank == 0:
            path = _full_optimizer_file(call.folder, call.index)
            logger.info("Saving optimizer state to %s", path)
            write_object(state, path)

    def load_optimizer(self, call: _Call, model: nn.Module, optimizer: Optimizer) -> None:
        from accel.checkpoint.layout import read_object

        state = read_object(_full_optimizer_file(call.folder, call.index))
        set_full_optimizer_state(model, optimizer, state, call.version)


class _Local(_Sharded):
    """``LOCAL_STATE_DICT`` (FSDP1): each process's flat shards in a file of its own, loaded on
    the same number of processes only (the optimizer is saved as with SHARDED)."""

    def save_model(self, call: _Call, model: nn.Module, peft_model: PeftModel | None) -> None:
        from accel.checkpoint.layout import write_object

        # the flat shards hold every weight: adapter_only does not apply
        path = _local_model_file(call.folder, call.index, call.rank)
        write_object(_local_tree(local_state(model)), path)

    def load_model(
        self, call: _Call, model: nn.Module, peft_model: PeftModel | None
    ) -> _IncompatibleKeys:
        from accel.checkpoint.layout import read_object
        from accel.errors import CheckpointError

        path = _local_model_file(call.folder, call.index, call.rank)
        if not path.exists():
            raise CheckpointError(
                f"{path} is missing: a LOCAL_STATE_DICT checkpoint loads only on the number of "
                "processes that saved it; save with state_dict_type=SHARDED_STATE_DICT to resume "
                "on another number of processes"
            )
        state = _restore(local_state(model), read_object(path))  # copied in place
        if any(key.endswith("_flat_param") for key in state):
            return _incompatible([], [])  # the shards were views of the flat parameters
        # one process: FSDP1 does not shard, its local state dict holds copies
        return _load_local_state(model, state)


_KINDS: dict[str, _Sharded] = {
    "FULL_STATE_DICT": _Full(),
    "SHARDED_STATE_DICT": _Sharded(),
    "LOCAL_STATE_DICT": _Local(),
}
"""What each ``state_dict_type`` does: the one place the three are told apart."""


def _strategy(fsdp_plugin: FullyShardedDataParallelPlugin) -> _Sharded:
    """The strategy of the plugin's ``state_dict_type`` (a name or torch's enum)."""
    value = fsdp_plugin.state_dict_type
    return _KINDS[str(getattr(value, "name", value)).upper()]


def _call(
    fsdp_plugin: FullyShardedDataParallelPlugin,
    accelerator: RunHandle,
    directory: str | os.PathLike,
    index: int,
    use_dcp: bool,
) -> _Call:
    # From a CPU device "offloading" copies nothing, and FSDP1's gathered optimizer states
    # then share one buffer: offload only from accelerators.
    return _Call(
        folder=Path(directory),
        index=index,
        rank=accelerator.process_index,
        use_dcp=use_dcp,
        version=int(getattr(fsdp_plugin, "fsdp_version", None) or 2),
        offload=accelerator.device.type != "cpu",
    )


# -- Accelerate's functions ----------------------------------------------------------------
def save_fsdp_model(
    fsdp_plugin: FullyShardedDataParallelPlugin,
    accelerator: RunHandle,
    model: nn.Module,
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
    call = _call(fsdp_plugin, accelerator, output_dir, model_index, use_dcp)
    call.folder.mkdir(parents=True, exist_ok=True)
    peft_model = _peft_model(model) if adapter_only else None
    _strategy(fsdp_plugin).save_model(call, model, peft_model)
    accelerator.wait_for_everyone()


def load_fsdp_model(
    fsdp_plugin: FullyShardedDataParallelPlugin,
    accelerator: RunHandle,
    model: nn.Module,
    input_dir: str | os.PathLike,
    model_index: int = 0,
    adapter_only: bool = False,
    use_dcp: bool = True,
) -> _IncompatibleKeys:
    """Load what :func:`save_fsdp_model` wrote in ``input_dir`` into the FSDP ``model``.

    Every process must call it. Returns the missing and unexpected keys (``_IncompatibleKeys``).
    With ``adapter_only`` only adapter weights count, under PEFT's names: missing, the model's
    adapter entries the checkpoint lacks (they keep their values); unexpected, the checkpoint's
    entries that are not (Accelerate's ``missing_keys`` also lists every base weight). With
    ``FULL_STATE_DICT`` the main process reports them, the others none. A full file is read by the main
    process and broadcast; a DCP folder reshards to the current number of processes
    (``input_dir`` may be the checkpoint folder or the ``pytorch_model_fsdp_<i>`` folder).
    """
    accelerator.wait_for_everyone()
    call = _call(fsdp_plugin, accelerator, input_dir, model_index, use_dcp)
    peft_model = _peft_model(model) if adapter_only else None
    result = _strategy(fsdp_plugin).load_model(call, model, peft_model)
    accelerator.wait_for_everyone()
    return result


def save_fsdp_optimizer(
    fsdp_plugin: FullyShardedDataParallelPlugin,
    accelerator: RunHandle,
    optimizer: Optimizer,
    model: nn.Module,
    output_dir: str | os.PathLike,
    optimizer_index: int = 0,
    use_dcp: bool = True,
) -> None:
    """Save the state of ``optimizer`` (over the FSDP ``model``'s parameters) into ``output_dir``.

    Every process must call it. ``FULL_STATE_DICT``: the main process writes ``optimizer.bin``
    (``optimizer_<optimizer_index>.bin``); otherwise every process writes its shards into the
    DCP folder ``optimizer_<optimizer_index>/`` (per-process ``.bin`` files with ``use_dcp=False``).
    """
    call = _call(fsdp_plugin, accelerator, output_dir, optimizer_index, use_dcp)
    call.folder.mkdir(parents=True, exist_ok=True)
    _strategy(fsdp_plugin).save_optimizer(call, model, _inner(optimizer))
    accelerator.wait_for_everyone()


def load_fsdp_optimizer(
    fsdp_plugin: FullyShardedDataParallelPlugin,
    accelerator: RunHandle,
    optimizer: Optimizer,
    model: nn.Module,
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
    del adapter_only
    accelerator.wait_for_everyone()
    call = _call(fsdp_plugin, accelerator, input_dir, optimizer_index, use_dcp)
    _strategy(fsdp_plugin).load_optimizer(call, model, _inner(optimizer))
    accelerator.wait_for_everyone()


__all__ = ["load_fsdp_model", "load_fsdp_optimizer", "save_fsdp_model", "save_fsdp_optimizer"]
