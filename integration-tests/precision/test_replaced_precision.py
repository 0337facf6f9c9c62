"""A precision replaced before ``prepare`` reaches every backend: each reads the run's
precision object (``context.precision``: its ``dtype``, ``fp8``), never a name.

DDP, FSDP, DeepSpeed and Megatron-LM run in one real process (``workers/replaced.py``, a
one-process gloo group);
XLA's rule is checked here on CPU (torch_xla is not needed to refuse a precision). accel-bnb
reads no run precision (a quantization config names its own dtypes), so it has nothing to see.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from accel import Accelerator
from accel.errors import ConfigError
from accel.precision.native import BF16Precision, FP16Precision

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).parent / "workers" / "replaced.py"


@pytest.mark.timeout(600)
@pytest.mark.skipif(
    shutil.which(os.environ.get("CXX", "c++")) is None,
    reason="DeepSpeed JIT-builds its CPU ops with a C++ compiler: apt-get install g++",
)
def test_a_precision_set_before_prepare_reaches_ddp_fsdp_deepspeed_and_megatron():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCEL_", "ACCELERATE_"))}
    env.update(
        ACCEL_USE_CPU="1",
        OMP_NUM_THREADS="1",
        DS_ACCELERATOR="cpu",
        # shared with the DeepSpeed tests, which build the same ops there
        TORCH_EXTENSIONS_DIR=os.environ.get(
            "TORCH_EXTENSIONS_DIR", str(REPO / ".cache" / "torch_extensions")
        ),
    )
    checks = ["ddp", "fsdp", "deepspeed", "megatron"]
    done = subprocess.run(  # one real process: its own one-process gloo group
        [sys.executable, str(WORKER), *checks], capture_output=True, text=True, timeout=540, env=env
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    assert [line for line in done.stdout.splitlines() if line.startswith("ok ")] == [
        f"ok {check}" for check in checks
    ], done.stdout


def test_the_xla_backend_checks_the_precision_it_is_given_at_prepare():
    from accel_fp8.precision import FP8Precision
    from accel_tpu.backend import XLABackend
    from accel_tpu.settings import check_precision

    accelerator = Accelerator(cpu=True)
    backend = XLABackend(accelerator.backend_context)  # not set up: no XLA runtime needed
    accelerator.precision = FP16Precision("fp16", accelerator.device, {})
    with pytest.raises(ConfigError, match="mixed_precision fp16 is not supported on XLA devices"):
        backend.prepare([torch.nn.Linear(2, 2)], [True])
    check_precision(BF16Precision("bf16", accelerator.device, {}))  # by its fields: accepted
    check_precision(accelerator.precision.__class__.__mro__[-2])  # Precision: full precision
    with pytest.raises(ConfigError, match="mixed_precision fp8 is not supported"):
        check_precision(FP8Precision)  # bf16 dtype, but FP8 layers
