"""accel-fsdp on 2 real gloo processes, then a 1-process reload of their sharded checkpoint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).parent / "workers" / "fsdp_checks.py"


def _run(command: list[str], timeout: float) -> str:
    env = {**os.environ, "ACCEL_USE_CPU": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, (
        f"exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-6000:]}"
    )
    return done.stdout


@pytest.mark.timeout(900)
def test_fsdp_parity_checkpoints_and_resharding(tmp_path):
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(WORKER),
    ]
    out = _run([*torchrun, "parity,checkpoints", str(tmp_path)], timeout=560)
    assert "ok parity" in out and "ok checkpoints" in out
    out = _run([sys.executable, str(WORKER), "reload", str(tmp_path)], timeout=120)
    assert "ok reload" in out
    out = _run([*torchrun, "grow", str(tmp_path)], timeout=120)
    assert "ok grow" in out


def test_bad_fsdp_values_name_the_key():
    from accel.errors import ConfigError
    from accel_fsdp import FullyShardedDataParallelPlugin
    from accel_fsdp.config import validate_section

    with pytest.raises(ConfigError, match="sharding_strategy"):
        FullyShardedDataParallelPlugin(sharding_strategy="HALF_SHARD")
    with pytest.raises(ConfigError, match="LOCAL_STATE_DICT"):
        FullyShardedDataParallelPlugin(fsdp_version=2, state_dict_type="LOCAL_STATE_DICT")
    assert FullyShardedDataParallelPlugin(sharding_strategy=2).sharding_strategy == "SHARD_GRAD_OP"
    errors = validate_section(
        {"fsdp_sharding_strategy": 9, "fsdp_offload_params": "maybe", "fsdp_colour": "red"}
    )
    assert len(errors) == 3
    assert any("fsdp_colour" in e for e in errors) and any(
        "fsdp_offload_params" in e for e in errors
    )
