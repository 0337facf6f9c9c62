"""Accelerate's own FSDP config file (with `fsdp_ignored_modules`) launches 2 FSDP processes via `accel launch`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent / "workers" / "accelerate_fsdp_config.py"

# what `accelerate config` writes for FSDP2 (Accelerate 1.x), with use_cpu to run on a laptop
CONFIG = """\
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
enable_cpu_affinity: false
fsdp_config:
  fsdp_activation_checkpointing: false
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_cpu_ram_efficient_loading: false
  fsdp_ignored_modules: {ignored}
  fsdp_offload_params: false
  fsdp_reshard_after_forward: true
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_version: 2
machine_rank: 0
main_training_function: main
mixed_precision: 'no'
num_machines: 1
num_processes: 2
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: true
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("ignored", ["null", "head"])
def test_accelerate_fsdp_config_with_ignored_modules_launches(tmp_path, ignored):
    config = tmp_path / "fsdp.yaml"
    config.write_text(CONFIG.format(ignored=ignored))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ACCEL_", "PET_", "TORCHELASTIC_"))
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(ACCEL_CONFIG_DIR=str(tmp_path / "cfg"), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    command = [
        str(Path(sys.executable).with_name("accel")),
        "launch",
        "--config_file",
        str(config),
        str(SCRIPT),
        ignored,
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=280, env=env, cwd=tmp_path,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    assert "ok accelerate fsdp config" in done.stdout
