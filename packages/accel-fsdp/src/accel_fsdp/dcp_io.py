"""FSDP's sharded checkpoint files: DCP (standard, or core's raw-bytes files), now or in the background.

:func:`save_or_stage` saves a state dict of DTensors with
:func:`accel.checkpoint.dcp_files.save` now, or hands it to
``save_state(..., async_save=True)`` (core's :func:`accel.checkpoint.layout.write_or_stage`):
the local tensors are copied by core's staging and DCP writes them in the background
writer thread.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, cast

import torch
from accel.checkpoint.dcp_files import save
from accel.checkpoint.layout import write_or_stage
from accel.config.options import Option
from torch.distributed.tensor import DTensor

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

Folder = str | os.PathLike
"""Where a checkpoint folder is."""

FORMAT_ENV = "ACCEL_FSDP_CHECKPOINT_FORMAT"
"""``dcp`` (default): standard DCP files; ``raw``: accel's raw-bytes files (faster, accel reads them)."""

CHECKPOINT_FORMAT = Option(
    "fsdp_checkpoint_format",
    default="dcp",
    choices=("dcp", "raw"),
    allowed="dcp (standard torch.distributed.checkpoint files, the default) or raw "
    "(accel's faster files, which only accel reads)",
    env=FORMAT_ENV,
    flag=None,
    in_file=False,
)
"""The declaration :func:`raw_format` reads :data:`FORMAT_ENV` through."""


def raw_format() -> bool:
    """Whether sharded checkpoints are written as raw-bytes files (``ACCEL_FSDP_CHECKPOINT_FORMAT=raw``)."""
    return CHECKPOINT_FORMAT.from_env() == "raw"


def save_or_stage(
    state_dict: Mapping[str, object], folder: Folder, process_group: ProcessGroup | None = None
) -> None:
    """:func:`save` now, or, during ``save_state(..., async_save=True)``, in the background.

    The DTensors are handed to core's staging as their local tensors (which it copies)
    and rebuilt around the copies in the writer thread, where DCP's collectives run on
    ``process_group`` (a group of the checkpoint's own: never the training loop's).
    """
    specs: dict[tuple, tuple] = {}
    local = _to_local(state_dict, specs, ())
    write_or_stage(partial(_save_local, specs, folder, process_group, raw_format()), local)


def _save_local(
    specs: dict[tuple, tuple],
    folder: Folder,
    process_group: ProcessGroup | None,
    raw: bool,
    local: object,
) -> None:
    state = cast("dict[str, object]", _from_local(local, specs, ()))  # the dict save_or_stage took
    save(state, folder, process_group, raw=raw)


def _to_local(value: object, specs: dict[tuple, tuple], path: tuple) -> object:
    """``value`` with each DTensor replaced by its local tensor; ``specs[path]`` rebuilds it."""
    if isinstance(value, DTensor):
        specs[path] = (value.device_mesh, value.placements, value.shape, value.stride())
        return value.to_local()
    if isinstance(value, dict):
        return {key: _to_local(item, specs, (*path, key)) for key, item in value.items()}
    if isinstance(value, list):
        return [_to_local(item, specs, (*path, i)) for i, item in enumerate(value)]
    return value


def _from_local(value: object, specs: dict[tuple, tuple], path: tuple) -> object:
    spec = specs.get(path)
    if spec is not None and isinstance(value, torch.Tensor):
        mesh, placements, shape, stride = spec
        return DTensor.from_local(
            value, mesh, placements, run_check=False, shape=shape, stride=stride
        )
    if isinstance(value, dict):
        return {key: _from_local(item, specs, (*path, key)) for key, item in value.items()}
    if isinstance(value, list):
        return [_from_local(item, specs, (*path, i)) for i, item in enumerate(value)]
    return value
