"""Accelerate's FSDP checkpoint functions and transformers' Trainer on 2 real gloo processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).parent / "workers" / "fsdp_utils_checks.py"


def _torchrun(checks: str, folder: Path, timeout: float) -> str:
    # ACCEL_FSDP_ON_CPU: transformers' Trainer (accelerate.Accelerator) shards on CPU too
    env = {**os.environ, "ACCEL_USE_CPU": "1", "ACCEL_FSDP_ON_CPU": "1", "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(WORKER),
        checks,
        str(folder),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, (
        f"exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-6000:]}"
    )
    return done.stdout


@pytest.mark.timeout(400)
def test_save_and_load_fsdp_model_and_optimizer_round_trip(tmp_path):
    """FULL, SHARDED (DCP and per-process files) and LOCAL, FSDP2 and FSDP1."""
    assert "ok roundtrip" in _torchrun("roundtrip", tmp_path, timeout=360)


@pytest.mark.timeout(400)
def test_adapter_only_with_a_peft_lora_model(tmp_path):
    pytest.importorskip("peft")
    assert "ok adapter" in _torchrun("adapter", tmp_path, timeout=360)


@pytest.mark.timeout(400)
def test_trainer_saves_and_resumes_an_fsdp_checkpoint(tmp_path):
    pytest.importorskip("transformers")
    assert "ok trainer" in _torchrun("trainer", tmp_path, timeout=360)
