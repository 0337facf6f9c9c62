"""The seed's FSDP YAML files launch a real 2-process FSDP training through `accel launch`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SEED = ROOT / "packages" / "accel-cli" / "tests" / "data"
SCRIPT = Path(__file__).parent / "workers" / "seed_yaml_train.py"


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("config", "state_dict_type", "offload"),
    [
        ("seed_fsdp_full.yaml", "SHARDED_STATE_DICT", "no-offload"),
        ("seed_fsdp.yaml", "FULL_STATE_DICT", "offload"),
    ],
)
def test_seed_fsdp_yaml_trains_through_accel_launch(tmp_path, config, state_dict_type, offload):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ACCEL_", "PET_", "TORCHELASTIC_"))
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(ACCEL_CONFIG_DIR=str(tmp_path / "cfg"), PYTHONUNBUFFERED="1")
    command = [
        str(Path(sys.executable).with_name("accel")),
        "launch",
        "--config_file",
        str(SEED / config),
        "--num_processes",  # the YAMLs are written for GPUs: run 2 CPU processes
        "2",
        "--cpu",
        str(SCRIPT),
        str(tmp_path),
        state_dict_type,
        offload,
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=280, env=env, cwd=tmp_path,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    assert "ok seed yaml" in done.stdout
    if state_dict_type == "SHARDED_STATE_DICT":
        assert (tmp_path / "ckpt" / "pytorch_model_fsdp_0").is_dir()
