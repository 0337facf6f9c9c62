"""accel-core runs its own conformance kit: the single-process backend and the no/fp16/bf16 precisions."""

from __future__ import annotations

import torch
from accel.precision.native import BF16Precision, FP16Precision, FullPrecision
from accel.testing import BackendConformance, LauncherConformance, PrecisionConformance


class TestSingleProcessBackendConformance(BackendConformance):
    """One process, no launcher: trains like plain PyTorch and resumes in a new process."""

    backend_name = "single_process"
    world_sizes = (1,)


class TestFullPrecisionConformance(PrecisionConformance):
    """``no``: float32 everywhere, no loss scaler."""

    precision_name = "no"
    precision_class = FullPrecision
    compute_dtype = torch.float32


class TestBF16PrecisionConformance(PrecisionConformance):
    """``bf16``: autocast to bfloat16, float32 weights and outputs."""

    precision_name = "bf16"
    precision_class = BF16Precision
    compute_dtype = torch.bfloat16


class TestFP16PrecisionConformance(PrecisionConformance):
    """``fp16``: autocast to float16 with a GradScaler whose state is checkpointed."""

    precision_name = "fp16"
    precision_class = FP16Precision
    compute_dtype = torch.float16


class TestTorchrunLauncherConformance(LauncherConformance):
    """Two local processes through ``torch.distributed.run`` (core's default launcher)."""

    launcher_name = "torchrun"
    settings = {"num_processes": 2, "use_cpu": True}


class TestSimpleLauncherConformance(LauncherConformance):
    """One local process, run directly (no torchrun)."""

    launcher_name = "simple"
    settings = {"num_processes": 1, "use_cpu": True}
