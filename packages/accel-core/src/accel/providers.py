"""Which package provides each distributed type, precision and quantizer (no imports: cheap)."""

from __future__ import annotations

PROVIDERS: dict[str, tuple[str, str]] = {
    # distributed types
    "MULTI_CPU": ("multi-process training", "accel-ddp"),
    "MULTI_GPU": ("multi-GPU training", "accel-ddp"),
    "MULTI_XPU": ("multi-XPU training", "accel-ddp"),
    "MULTI_NPU": ("multi-NPU training", "accel-ddp"),
    "MULTI_MLU": ("multi-MLU training", "accel-ddp"),
    "MULTI_MUSA": ("multi-MUSA training", "accel-ddp"),
    "MULTI_HPU": ("multi-HPU training", "accel-ddp"),
    "FSDP": ("FSDP", "accel-fsdp"),
    "DEEPSPEED": ("DeepSpeed", "accel-deepspeed"),
    "MEGATRON_LM": ("Megatron-LM", "accel-megatron"),
    "XLA": ("XLA (TPU)", "accel-tpu"),
    "TPU": ("XLA (TPU)", "accel-tpu"),
    # precisions
    "fp8": ("mixed_precision='fp8'", "accel-fp8"),
    # quantizers
    "bnb": ("bitsandbytes quantization", "accel-bnb"),
}
"""Who provides what, for error messages when the provider is absent."""
