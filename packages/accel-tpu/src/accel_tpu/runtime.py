"""Thin, lazily imported access to the torch_xla runtime (device, replica ordinals, step marking).

Importing this module does not import torch_xla; each function does, on first call.
"""

from __future__ import annotations

import importlib.util
from typing import TypeVar, cast

import torch

T = TypeVar("T")


def xla_available() -> bool:
    """Whether torch_xla is installed (without importing it)."""
    return importlib.util.find_spec("torch_xla") is not None


def device() -> torch.device:
    """The XLA device of this replica (``xla:0`` in a process driving one device)."""
    import torch_xla

    return torch_xla.device()


def world_size() -> int:
    """Number of replicas taking part (1 under SPMD, where one process drives every device)."""
    import torch_xla.runtime as xr

    return int(xr.world_size())


def global_ordinal() -> int:
    """This replica's global ordinal."""
    import torch_xla.runtime as xr

    return int(xr.global_ordinal())


def local_ordinal() -> int:
    """This replica's ordinal on its host."""
    import torch_xla.runtime as xr

    return int(xr.local_ordinal())


def is_spmd() -> bool:
    """Whether SPMD mode is on (``torch_xla.runtime.use_spmd()`` was called)."""
    import torch_xla.runtime as xr

    return bool(xr.is_spmd())


def global_device_count() -> int:
    """Number of devices the runtime sees over all hosts (SPMD meshes span them)."""
    import torch_xla.runtime as xr

    return int(xr.global_runtime_device_count())


def sync() -> None:
    """End the traced step: compile (once per graph shape) and run the pending XLA graph."""
    import torch_xla

    torch_xla.sync()


def to_cpu(data: T) -> T:
    """``data`` (tensors nested in lists, tuples, dicts) with every XLA tensor copied to the CPU."""
    from accel.distributed.operations import recursively_apply

    sync()
    # Each tensor leaf becomes a tensor: the structure is still a T.
    return cast(
        "T", recursively_apply(lambda t: t.detach().cpu() if t.device.type == "xla" else t, data)
    )
