"""accel-fsdp: Fully Sharded Data Parallel for accel (FSDP2 ``fully_shard`` by default, FSDP1 supported)."""

from __future__ import annotations

from .config import FullyShardedDataParallelPlugin
from .merge import merge_fsdp_weights

__all__ = ["FullyShardedDataParallelPlugin", "merge_fsdp_weights"]
