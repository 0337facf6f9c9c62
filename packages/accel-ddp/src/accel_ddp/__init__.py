"""accel-ddp: the DistributedDataParallel backend for accel (multi-CPU with gloo, multi-GPU with nccl)."""

from __future__ import annotations

from .kwargs import DDPCommunicationHookType, DistributedDataParallelKwargs
from .local_sgd import LocalSGD

__all__ = ["DDPCommunicationHookType", "DistributedDataParallelKwargs", "LocalSGD"]
