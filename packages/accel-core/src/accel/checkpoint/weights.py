"""Model weight files: safetensors / torch files, sharding with an index, tied-weight aliases."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, cast

import torch

from accel.logging import get_plain_logger
from accel.sizes import parse_size

if TYPE_CHECKING:
    from torch.serialization import MAP_LOCATION

logger = get_plain_logger(__name__)

WEIGHTS_NAME = "pytorch_model.bin"

SAFE_WEIGHTS_NAME = "model.safetensors"

WEIGHTS_INDEX_NAME = "pytorch_model.bin.index.json"

SAFE_WEIGHTS_INDEX_NAME = "model.safetensors.index.json"

ALIASES_KEY = "accel_aliases"
"""safetensors metadata key mapping each dropped tied name to the name kept for its storage."""


def id_tensor_storage(tensor: torch.Tensor) -> tuple[torch.device, int, int]:
    """An identifier of the storage behind ``tensor`` (tensors sharing memory share it)."""
    if tensor.device.type == "meta":
        return (tensor.device, id(tensor), 0)
    storage = tensor.untyped_storage()
    return (tensor.device, storage.data_ptr(), storage.nbytes())


def split_aliases(
    state_dict: dict[str, torch.Tensor],
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Drop tensors that alias another entry (tied weights); return the rest and ``{dropped: kept}``."""
    seen: dict[tuple[object, ...], str] = {}
    kept: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    for name, tensor in state_dict.items():
        if not isinstance(tensor, torch.Tensor):
            continue
        key = id_tensor_storage(tensor) + (
            tensor.storage_offset(),
            tuple(tensor.shape),
            tensor.dtype,
        )
        if key in seen:
            aliases[name] = seen[key]
        else:
            seen[key] = name
            kept[name] = tensor.detach().contiguous()
    return kept, aliases


def shard_state_dict(
    state_dict: dict[str, torch.Tensor], max_shard_size: int | str
) -> list[dict[str, torch.Tensor]]:
    """Split ``state_dict`` in order into shards of at most ``max_shard_size`` bytes (a larger tensor gets its own)."""
    limit = parse_size(max_shard_size)
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in state_dict.items():
        nbytes = tensor.numel() * tensor.element_size()
        if shards[-1] and size + nbytes > limit:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += nbytes
    return shards


def save_weights(
    state_dict: dict[str, torch.Tensor],
    save_directory: str | os.PathLike,
    max_shard_size: int | str = "10GB",
    safe_serialization: bool = True,
    save_function: Callable[[object, str], object] | None = None,
) -> list[str]:
    """Write ``state_dict`` as one file or as shards plus an index JSON; return the file names.

    Tied tensors are written once; their other names are recorded as aliases.
    """
    from safetensors.torch import save_file

    os.makedirs(save_directory, exist_ok=True)
    tensors, aliases = split_aliases(state_dict)
    tensors = {k: v.cpu() for k, v in tensors.items()}
    shards = shard_state_dict(tensors, max_shard_size)
    base = SAFE_WEIGHTS_NAME if safe_serialization else WEIGHTS_NAME
    stem, ext = base.rsplit(".", 1)
    names = (
        [base]
        if len(shards) == 1
        else [f"{stem}-{i + 1:05d}-of-{len(shards):05d}.{ext}" for i in range(len(shards))]
    )
    for name, shard in zip(names, shards):
        path = os.path.join(save_directory, name)
        if safe_serialization:
            save_file(shard, path, metadata={"format": "pt", ALIASES_KEY: json.dumps(aliases)})
        else:
            (save_function or torch.save)(
                {**shard, **{k: shard[v] for k, v in aliases.items() if v in shard}}, path
            )
    if len(shards) > 1:
        index = {
            "metadata": {
                "total_size": sum(t.numel() * t.element_size() for t in tensors.values()),
                ALIASES_KEY: aliases,
            },
            "weight_map": {k: n for n, shard in zip(names, shards) for k in shard},
        }
        index_name = SAFE_WEIGHTS_INDEX_NAME if safe_serialization else WEIGHTS_INDEX_NAME
        with open(os.path.join(save_directory, index_name), "w") as f:
            json.dump(index, f, indent=2, sort_keys=True)
            f.write("\n")
        names.append(index_name)
    return names


def load_weights(
    path: str | os.PathLike, device: str | torch.device = "cpu"
) -> dict[str, torch.Tensor]:
    """Read a file or directory written by :func:`save_weights` (tied names restored); never unpickles code."""
    from safetensors import safe_open

    path = os.fspath(path)
    if os.path.isdir(path):
        for index_name in (SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_INDEX_NAME):
            index_path = os.path.join(path, index_name)
            if os.path.exists(index_path):
                with open(index_path) as f:
                    index = json.load(f)
                result: dict[str, torch.Tensor] = {}
                for shard in sorted(set(index["weight_map"].values())):
                    result.update(load_weights(os.path.join(path, shard), device))
                for alias, target in index.get("metadata", {}).get(ALIASES_KEY, {}).items():
                    result[alias] = result[target]
                return result
        for name in (SAFE_WEIGHTS_NAME, WEIGHTS_NAME):
            if os.path.exists(os.path.join(path, name)):
                return load_weights(os.path.join(path, name), device)
        raise FileNotFoundError(f"no {SAFE_WEIGHTS_NAME} or {WEIGHTS_NAME} (or index) in {path}")
    if path.endswith(".safetensors"):
        result = {}
        with safe_open(path, framework="pt", device=str(device)) as f:
            for key in f.keys():
                result[key] = f.get_tensor(key)
            aliases = json.loads((f.metadata() or {}).get(ALIASES_KEY, "{}"))
        for alias, target in aliases.items():
            if target in result:
                result[alias] = result[target]
        return result
    return torch.load(path, map_location=device, weights_only=True)


def clean_state_dict_for_safetensors(
    state_dict: dict[str, torch.Tensor],
) -> dict[str, torch.Tensor]:
    """``state_dict`` ready for safetensors: tensors sharing storage kept once, all contiguous.

    As in Accelerate, the names left out are logged (a warning naming each and the name
    kept for its memory): a model that ties them again on loading gets them back.
    """
    seen: dict[tuple[torch.device, int, int], str] = {}
    cleaned: dict[str, torch.Tensor] = {}
    removed: dict[str, str] = {}
    for name, tensor in state_dict.items():
        if isinstance(tensor, torch.Tensor) and tensor.device.type != "meta":
            key = id_tensor_storage(tensor)
            if key in seen:
                removed[name] = seen[key]
                continue
            seen[key] = name
            tensor = tensor.contiguous()
        cleaned[name] = tensor
    if removed:
        shared = ", ".join(f"{name} (shares memory with {kept})" for name, kept in removed.items())
        logger.warning(
            f"Removed shared tensors while saving: {shared}. This should be OK if the model "
            "ties them again when loading; check that loading it warns about no missing keys."
        )
    return cleaned


def save(
    obj: object,
    f: str | os.PathLike,
    save_on_each_node: bool = False,
    safe_serialization: bool = False,
) -> None:
    """Save ``obj`` to ``f`` once per machine (``save_on_each_node``) or once in all, on the (local) main process.

    ``safe_serialization`` writes safetensors (``obj`` must then be a dict of tensors).
    """
    from accel.state import PartialState

    state = PartialState()
    if not (state.is_local_main_process if save_on_each_node else state.is_main_process):
        return
    if safe_serialization:
        from safetensors.torch import save_file

        tensors = cast("dict[str, torch.Tensor]", obj)  # safe_serialization: a dict of tensors
        save_file(
            clean_state_dict_for_safetensors(tensors), os.fspath(f), metadata={"format": "pt"}
        )
    else:
        torch.save(obj, f)


def load(
    f: str | os.PathLike | IO[bytes],
    map_location: MAP_LOCATION = None,
    **kwargs: Any,  # torch.load's keywords
) -> Any:  # torch.load's: what was pickled
    """``torch.load(f)``, with ``weights_only=True`` unless asked otherwise (no code is unpickled).

    Accelerate passes ``weights_only`` through as well; accel keeps the safe default of
    torch >= 2.6 on every torch version. A ``.safetensors`` file is read with safetensors.
    """
    path = os.fspath(f) if isinstance(f, (str, os.PathLike)) else None
    if path is not None and path.endswith(".safetensors"):
        from safetensors.torch import load_file

        return load_file(path, device=str(map_location or "cpu"))
    kwargs.setdefault("weights_only", True)
    return torch.load(f, map_location=map_location, **kwargs)


def load_state_dict(
    checkpoint_file: str | os.PathLike,
    device_map: dict[str, int | str | torch.device] | None = None,
) -> dict[str, torch.Tensor]:
    """The tensors of one checkpoint file (safetensors or a weights-only torch file), on the CPU."""
    del device_map  # every tensor is read to the CPU; dispatch places it
    return load(checkpoint_file, map_location="cpu")
