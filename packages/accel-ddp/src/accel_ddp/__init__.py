"""accel-ddp: the DistributedDataParallel backend for accel (multi-CPU with gloo, multi-GPU with nccl).

Names are imported on first use, so registering the plugin does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports

if TYPE_CHECKING:  # what type checkers and editors follow; at run time names load on first use
    from accel_ddp.kwargs import DDPCommunicationHookType as DDPCommunicationHookType
    from accel_ddp.kwargs import DistributedDataParallelKwargs as DistributedDataParallelKwargs
    from accel_ddp.local_sgd import LocalSGD as LocalSGD

_NAMES = {
    "DDPCommunicationHookType": "accel_ddp.kwargs",
    "DistributedDataParallelKwargs": "accel_ddp.kwargs",
    "LocalSGD": "accel_ddp.local_sgd",
}
"""Public names and the module defining each, imported on first use."""

__all__ = sorted(_NAMES)

__getattr__, __dir__ = exports(__name__, _NAMES)
