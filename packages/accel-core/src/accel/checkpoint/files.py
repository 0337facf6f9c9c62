"""Reading model checkpoints: single files, sharded indexes and folders; safetensors or weights-only torch files."""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch

from accel.checkpoint.weights import (
    ALIASES_KEY,
    SAFE_WEIGHTS_INDEX_NAME,
    SAFE_WEIGHTS_NAME,
    WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
)
from accel.errors import CheckpointError
from accel.logging import get_plain_logger

if TYPE_CHECKING:
    from safetensors import safe_open

logger = get_plain_logger(__name__)

DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
"""The device-map names :func:`load_checkpoint_and_dispatch` accepts instead of a dict."""


def checkpoint_files(checkpoint: str | os.PathLike) -> tuple[list[str], dict[str, str]]:
    """The weight files of ``checkpoint`` (a file, an index JSON or a folder) and its aliases."""
    path = os.fspath(checkpoint)
    if os.path.isdir(path):
        for name in (SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_INDEX_NAME):
            if os.path.isfile(os.path.join(path, name)):
                return checkpoint_files(os.path.join(path, name))
        for name in (SAFE_WEIGHTS_NAME, WEIGHTS_NAME):
            if os.path.isfile(os.path.join(path, name)):
                return [os.path.join(path, name)], {}
        indexes = sorted(f for f in os.listdir(path) if f.endswith(".index.json"))
        if len(indexes) == 1:
            return checkpoint_files(os.path.join(path, indexes[0]))
        files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
        if not files:
            files = sorted(f for f in os.listdir(path) if f.endswith((".bin", ".pt", ".pth")))
        if not files:
            raise CheckpointError(
                f"{path} holds no checkpoint: expected {SAFE_WEIGHTS_NAME}, {WEIGHTS_NAME}, an "
                "*.index.json, or *.safetensors / *.bin files"
            )
        return [os.path.join(path, f) for f in files], {}
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint {path} does not exist")
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            index = json.load(f)
        # {"weight_map": {name: file}, "metadata": ...}, or (as Accelerate accepts) a flat {name: file}
        weight_map = index.get("weight_map", index)
        if not isinstance(weight_map, dict) or not all(
            isinstance(f, str) for f in weight_map.values()
        ):
            raise CheckpointError(
                f"{path} is not a checkpoint index: expected a 'weight_map' or a flat "
                "{tensor name: file name} mapping"
            )
        folder = os.path.dirname(path)
        files = list(dict.fromkeys(weight_map.values()))
        aliases = dict(index.get("metadata", {}).get(ALIASES_KEY, {}))
        return [os.path.join(folder, f) for f in files], aliases
    return [path], {}


class FileReader:
    """Lazy access to the tensors of one checkpoint file."""

    def __init__(self, path: str):
        self.path = path
        self.is_safetensors = path.endswith(".safetensors")
        self._handle: safe_open | None = None
        self._tensors: dict[str, torch.Tensor] | None = None

    def __enter__(self) -> FileReader:
        if self.is_safetensors:
            from safetensors import safe_open

            self._handle = safe_open(self.path, framework="pt", device="cpu")
            self._context = self._handle.__enter__()
        else:
            self._tensors = _torch_load(self.path)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.__exit__(*exc)
        self._handle = None
        self._tensors = None

    def keys(self) -> list[str]:
        """Names of the tensors in the file."""
        if self._handle is not None:
            return list(self._context.keys())
        return list(self._tensors or {})

    def aliases(self) -> dict[str, str]:
        """Tied names the file dropped, from accel's safetensors metadata."""
        if self._handle is None:
            return {}
        return json.loads((self._context.metadata() or {}).get(ALIASES_KEY, "{}"))

    def dtype(self, key: str) -> torch.dtype:
        """dtype of one tensor, without reading it."""
        if self._handle is not None:
            name = self._context.get_slice(key).get_dtype()
            return _SAFETENSORS_DTYPES.get(name) or getattr(torch, name.lower())
        assert self._tensors is not None  # a torch file is read whole when opened
        return self._tensors[key].dtype

    def get(self, key: str) -> torch.Tensor:
        """One tensor (a memory map of the file for safetensors)."""
        if self._handle is not None:
            return self._context.get_tensor(key)
        assert self._tensors is not None
        return self._tensors[key]


_SAFETENSORS_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


def _torch_load(path: str) -> dict[str, torch.Tensor]:
    """``torch.load`` restricted to tensors (``weights_only=True``), memory-mapped when possible."""
    try:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as exc:  # legacy (non-zip) files cannot be memory-mapped
            if "mmap" not in str(exc) and "zipfile" not in str(exc):
                raise
            state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"refusing to load {path}: it holds Python objects, not only tensors, and unpickling "
            "them could run arbitrary code (torch.load(weights_only=True) rejected it). Convert "
            f"the checkpoint to safetensors from a trusted copy. Details: {exc}"
        ) from None
    if isinstance(state, Mapping) and "state_dict" in state and len(state) <= 3:
        state = state["state_dict"]
    if not isinstance(state, Mapping):
        raise CheckpointError(f"{path} does not hold a state dict (found {type(state).__name__})")
    return dict(state)
