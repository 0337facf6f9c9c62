"""Weights kept outside the model: raw files on disk read back through memory maps.

An offload folder holds one ``<name>.dat`` file per tensor (its raw bytes, C order) and an
``index.json`` mapping each tensor name to ``{"dtype", "shape"}`` (plus ``"file"`` when the
name of the file differs from ``<name>.dat``, e.g. for tied weights stored once). An entry
may instead point into a safetensors file (``{"safetensors_file", "weight_name", "dtype"}``)
so that weights of a safetensors checkpoint are offloaded without being copied.

Reading a ``.dat`` file maps it (``torch.from_file``, copy-on-write): nothing is read until
the tensor is used, and the pages are the operating system's file cache, not process memory
of our own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Generic, TypedDict, TypeVar, cast

import torch

from accel.big_model.modeling import set_module_tensor_to_device

INDEX_NAME = "index.json"

V = TypeVar("V")


class OffloadEntry(TypedDict, total=False):
    """One tensor of an offload index: a ``.dat`` file, or a tensor of a safetensors file."""

    dtype: str
    shape: list[int]
    file: str
    """The ``.dat`` file when it is not ``<name>.dat`` (a tied weight written once)."""
    safetensors_file: str
    weight_name: str
    """The tensor's name inside ``safetensors_file``."""


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name.replace("torch.", ""), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r} in an offload index")
    return dtype


def offload_weight(
    weight: torch.Tensor,
    weight_name: str,
    offload_folder: str | os.PathLike,
    index: dict[str, OffloadEntry] | None = None,
) -> dict[str, OffloadEntry]:
    """Write ``weight`` to ``offload_folder/<weight_name>.dat``; record it in ``index`` and return it.

    ``index.json`` is not written: call :func:`save_offload_index` once all weights are offloaded.
    """
    index = {} if index is None else index
    os.makedirs(offload_folder, exist_ok=True)
    file_name = f"{weight_name}.dat"
    tensor = weight.detach().to("cpu").contiguous().reshape(-1)
    if tensor.numel() > 0:
        tensor.view(torch.uint8).numpy().tofile(os.path.join(offload_folder, file_name))
    index[weight_name] = {"dtype": _dtype_name(weight.dtype), "shape": list(weight.shape)}
    return index


def load_offloaded_weight(
    weight_file: str | os.PathLike, weight_info: OffloadEntry
) -> torch.Tensor:
    """The tensor of one index entry: a memory map of ``weight_file`` (or a safetensors slice).

    A safetensors entry may leave out ``"dtype"`` (PEFT writes such entries): the tensor then
    keeps the dtype it has in the file.
    """
    if "safetensors_file" in weight_info:
        from safetensors import safe_open

        with safe_open(weight_info["safetensors_file"], framework="pt", device="cpu") as f:
            tensor = f.get_tensor(weight_info.get("weight_name", ""))
        if "dtype" not in weight_info:
            return tensor
        dtype = _dtype(weight_info["dtype"])
        return tensor if tensor.dtype == dtype else tensor.to(dtype)
    dtype = _dtype(weight_info["dtype"])
    shape = tuple(weight_info["shape"])
    numel = 1
    for size in shape:
        numel *= size
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    # Accelerate's folders store bfloat16 as int16 and name the storage dtype; the bytes are the same.
    return torch.from_file(os.fspath(weight_file), shared=False, size=numel, dtype=dtype).view(
        shape
    )


def save_offload_index(
    index: Mapping[str, OffloadEntry], offload_folder: str | os.PathLike
) -> None:
    """Merge ``index`` into ``offload_folder/index.json``."""
    if not index:
        return
    os.makedirs(offload_folder, exist_ok=True)
    path = os.path.join(offload_folder, INDEX_NAME)
    current: dict[str, OffloadEntry] = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            current = json.load(f)
    current.update(index)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(current, f, indent=2)


def read_offload_index(offload_folder: str | os.PathLike) -> dict[str, OffloadEntry]:
    """The ``index.json`` of ``offload_folder`` (empty when there is none)."""
    path = os.path.join(offload_folder, INDEX_NAME)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return cast("dict[str, OffloadEntry]", json.load(f))


def offload_state_dict(save_dir: str | os.PathLike, state_dict: Mapping[str, torch.Tensor]) -> None:
    """Write every tensor of ``state_dict`` to ``save_dir`` (one ``.dat`` file each) with an index.

    Tensors sharing storage (tied weights) are written once; their other names point to that file.
    """
    index: dict[str, OffloadEntry] = {}
    written: dict[tuple[object, ...], str] = {}
    for name, tensor in state_dict.items():
        key = (tensor.device, tensor.untyped_storage().data_ptr(), tensor.storage_offset())
        key += (tuple(tensor.shape), tensor.dtype)
        if tensor.device.type != "meta" and key in written:
            entry = index[written[key]].copy()
            entry["file"] = _file_of(written[key], index)
            index[name] = entry
            continue
        offload_weight(tensor, name, save_dir, index=index)
        written[key] = name
    save_offload_index(index, save_dir)


def _file_of(name: str, index: Mapping[str, OffloadEntry]) -> str:
    return index[name].get("file", f"{name}.dat")


def load_offloaded_weights(
    model: torch.nn.Module, index: Mapping[str, OffloadEntry], offload_folder: str | os.PathLike
) -> None:
    """Put the weights listed in ``index`` (from ``offload_folder``) back into ``model``, on the CPU."""
    for name, info in index.items():
        tensor = load_offloaded_weight(os.path.join(offload_folder, _file_of(name, index)), info)
        set_module_tensor_to_device(model, name, "cpu", value=tensor)


class PrefixedDataset(Mapping[str, V], Generic[V]):
    """The entries of ``dataset`` whose keys start with ``prefix``, looked up without it."""

    def __init__(self, dataset: Mapping[str, V], prefix: str):
        self.dataset = dataset
        self.prefix = prefix

    def __getitem__(self, key: str) -> V:
        return self.dataset[f"{self.prefix}{key}"]

    def __contains__(self, key: object) -> bool:
        return f"{self.prefix}{key}" in self.dataset

    def __iter__(self) -> Iterator[str]:
        n = len(self.prefix)
        return iter([key[n:] for key in self.dataset if key.startswith(self.prefix)])

    def __len__(self) -> int:
        return sum(1 for key in self.dataset if key.startswith(self.prefix))


class OffloadedWeightsLoader(Mapping[str, torch.Tensor]):
    """Read-only mapping name -> tensor over a state dict in memory and an offload folder.

    ``state_dict`` wins over the folder. Tensors of the folder are loaded (memory-mapped) on each
    lookup, so nothing stays in memory between two forwards.
    """

    def __init__(
        self,
        state_dict: Mapping[str, torch.Tensor] | None = None,
        save_folder: str | os.PathLike | None = None,
        index: Mapping[str, OffloadEntry] | None = None,
        device: str | torch.device | None = None,
    ):
        if state_dict is None and save_folder is None and index is None:
            raise ValueError("OffloadedWeightsLoader needs a state_dict, a save_folder or an index")
        self.state_dict = dict(state_dict or {})
        self.save_folder = os.fspath(save_folder) if save_folder is not None else None
        if index is None and self.save_folder is not None:
            index = read_offload_index(self.save_folder)
        self.index = dict(index or {})
        self.device = device
        self.all_keys = list(self.state_dict) + [k for k in self.index if k not in self.state_dict]

    def __getitem__(self, key: str) -> torch.Tensor:
        if key in self.state_dict:
            return self.state_dict[key]
        info = self.index[key]
        path = ""
        if "safetensors_file" not in info:
            if self.save_folder is None:
                raise KeyError(
                    f"{key}: the offload index names a file but no save_folder was given"
                )
            path = os.path.join(self.save_folder, _file_of(key, self.index))
        tensor = load_offloaded_weight(path, info)
        return tensor if self.device is None else tensor.to(self.device)

    def __contains__(self, key: object) -> bool:
        return key in self.state_dict or key in self.index

    def __iter__(self) -> Iterator[str]:
        return iter(self.all_keys)

    def __len__(self) -> int:
        return len(self.all_keys)
