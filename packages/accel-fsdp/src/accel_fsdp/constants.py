"""Accelerate's FSDP constants (``accelerate.utils.constants.FSDP_*``), torch-free.

transformers' ``TrainingArguments`` checks ``fsdp_config`` against these lists; the lists
come from the declarations of the ``fsdp_config`` section (:mod:`accel_fsdp.config`).
"""

from __future__ import annotations

from .config import AUTO_WRAP_POLICIES, BACKWARD_PREFETCH, SHARDING_STRATEGIES, STATE_DICT_TYPES

FSDP_SHARDING_STRATEGY: list[str] = list(SHARDING_STRATEGIES)
"""Sharding strategy names; position + 1 is torch's ``ShardingStrategy`` number."""

FSDP_AUTO_WRAP_POLICY: list[str] = list(AUTO_WRAP_POLICIES)
"""Auto-wrap policy names (``TRANSFORMER_BASED_WRAP`` first: transformers' default)."""

FSDP_BACKWARD_PREFETCH: list[str] = list(BACKWARD_PREFETCH)
"""Backward prefetch names (FSDP1)."""

FSDP_STATE_DICT_TYPE: list[str] = list(STATE_DICT_TYPES)
"""State dict types; position + 1 is torch's ``StateDictType`` number."""

FSDP2_STATE_DICT_TYPE: list[str] = [
    t for t in reversed(STATE_DICT_TYPES) if t != "LOCAL_STATE_DICT"
]
"""The state dict types FSDP2 supports, sharded first (as Accelerate lists them)."""

FSDP_PYTORCH_VERSION = "2.1.0.a0+32f93b1"
"""Accelerate's minimum torch for FSDP (2.1.0, spelled to admit MS-AMP's 2.1 prerelease);
accel-fsdp itself needs torch 2.6."""

FSDP2_PYTORCH_VERSION = "2.6.0"
"""The first torch with the public FSDP2 API (``torch.distributed.fsdp.fully_shard``)."""

FSDP_MODEL_NAME = "pytorch_model_fsdp"
"""Stem of the files written by :func:`accel_fsdp.checkpointing.save_fsdp_model`:
``pytorch_model_fsdp.bin`` (full), ``pytorch_model_fsdp_0/`` (sharded, DCP),
``pytorch_model_fsdp_rank0.bin`` (local)."""

__all__ = [
    "FSDP2_PYTORCH_VERSION",
    "FSDP2_STATE_DICT_TYPE",
    "FSDP_AUTO_WRAP_POLICY",
    "FSDP_BACKWARD_PREFETCH",
    "FSDP_MODEL_NAME",
    "FSDP_PYTORCH_VERSION",
    "FSDP_SHARDING_STRATEGY",
    "FSDP_STATE_DICT_TYPE",
]
