"""Device kinds: which accelerator this machine has, numbered devices, and what each kind implies.

The kinds and their order come from :data:`accel.catalog.DEVICE_KINDS`; every probe of
``torch.cuda`` / ``torch.xpu`` / ... in accel goes through this module. torch is imported
inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel import catalog

if TYPE_CHECKING:
    from types import ModuleType

    import torch


def _module(kind: str) -> ModuleType | None:
    import torch

    return getattr(torch, kind, None)


def is_available(kind: str) -> bool:
    """Whether ``torch.<kind>`` exists and reports a device (a broken vendor extension counts as absent)."""
    module = _module(kind)
    probe = getattr(module, "is_available", None)
    if probe is None:
        return False
    try:
        return bool(probe())
    except Exception:
        return False


def available_kind() -> str | None:
    """The first accelerator kind present on this machine (``"cuda"``, ``"xpu"``, ...), or None."""
    for kind in catalog.DEVICE_KINDS:
        if is_available(kind):
            return kind
    return None


def device_count(kind: str) -> int:
    """How many ``kind`` devices this process sees (0 when the kind is absent)."""
    module = _module(kind)
    return module.device_count() if module is not None and is_available(kind) else 0


def index_device(index: int) -> torch.device:
    """The accelerator numbered ``index`` on this machine, of whichever kind is present."""
    import torch

    kind = available_kind()
    if kind is None:
        raise ValueError(
            f"device index {index} needs an accelerator (a GPU) and none is available: "
            "use 'cpu' or 'disk' in the device map, or run on a machine with GPUs"
        )
    count = device_count(kind)
    if index >= count:
        raise ValueError(
            f"device index {index} does not exist: this machine has {count} {kind} device(s)"
        )
    return torch.device(kind, index)


def default_device(local_rank: int = 0, cpu: bool = False) -> torch.device:
    """The device a process with ``local_rank`` computes on: an accelerator, else MPS, else the CPU."""
    import torch

    if cpu:
        return torch.device("cpu")
    kind = available_kind()
    if kind is not None:
        return torch.device(kind, local_rank % max(device_count(kind), 1))
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def distributed_type_for(device_type: str) -> str:
    """The data-parallel distributed type of a multi-process job on ``device_type`` devices."""
    kind = catalog.DEVICE_KINDS.get(device_type)
    return kind.distributed_type if kind else "MULTI_CPU"


def process_group_backend(device_type: str) -> str:
    """The torch.distributed backend for ``device_type`` (gloo on the CPU)."""
    kind = catalog.DEVICE_KINDS.get(device_type)
    return kind.process_group_backend if kind else "gloo"
