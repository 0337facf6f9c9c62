"""accel-ddp: the DistributedDataParallel backend for accel (multi-CPU with gloo, multi-GPU with nccl).

Names are imported on first use, so registering the plugin does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    "DDPCommunicationHookType": "accel_ddp.kwargs",
    "DistributedDataParallelKwargs": "accel_ddp.kwargs",
    "LocalSGD": "accel_ddp.local_sgd",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name]), name)
    raise AttributeError(f"module 'accel_ddp' has no attribute {name!r}")
