"""accel-deepspeed on 2 real gloo processes with DeepSpeed's CPU accelerator.

DeepSpeed JIT-builds two C++ ops on first use (shm_comm, cpu_adam); they are kept in
``$TORCH_EXTENSIONS_DIR`` (default: ``.cache/torch_extensions`` of the repository), so
later runs reuse them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parents[1]
pytestmark = pytest.mark.skipif(
    shutil.which(os.environ.get("CXX", "c++")) is None,
    reason=(
        "DeepSpeed JIT-builds its CPU ops (shm_comm, cpu_adam) with a C++ compiler: "
        "apt-get install g++ (see .ci/setup.d/deepspeed.sh)"
    ),
)


def _env() -> dict[str, str]:
    return {
        "DS_ACCELERATOR": "cpu",
        "TORCH_EXTENSIONS_DIR": os.environ.get(
            "TORCH_EXTENSIONS_DIR", str(REPO / ".cache" / "torch_extensions")
        ),
    }


@pytest.mark.timeout(900)
def test_zero_stages_match_ddp_then_resume_in_new_processes(run_distributed, tmp_path):
    out = run_distributed("ds_checks.py", "train", str(tmp_path), timeout=840, env=_env()).stdout
    for name in (
        "zero0",
        "zero1",
        "zero2",
        "zero3",
        "zero2-offload",
        "zero2-bf16",
        "zero3-offload",
        "two-engines",
    ):
        assert f"ok {name}" in out, out[-3000:]
    out = run_distributed("ds_checks.py", "resume", str(tmp_path), timeout=300, env=_env()).stdout
    assert "ok resume zero2" in out and "ok resume zero3" in out


@pytest.mark.timeout(400)
def test_accel_launch_with_the_seed_yaml_and_config_file(tmp_path):
    configs = HERE / "configs"
    # the seed's zero_stage2_config.json, with fp16 left to mixed_precision: no fp16 on this CPU
    ds_json = (
        (configs / "zero_stage2_config.json")
        .read_text()
        .replace('"enabled": true', '"enabled": "auto"', 1)
    )
    (tmp_path / "zero_stage2_config.json").write_text(ds_json)
    yaml_text = (
        (configs / "zero2_config_file.yaml")
        .read_text()
        .replace("/home/ubuntu/accelerate/examples/deepspeed_config_templates", str(tmp_path))
    )
    config_file = tmp_path / "default_config.yaml"
    config_file.write_text(yaml_text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env.update(_env(), ACCEL_CONFIG_DIR=str(tmp_path), OMP_NUM_THREADS="1")
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("accel")),
            "launch",
            "--config_file",
            str(config_file),
            "--cpu",
            "--mixed_precision",
            "no",
            str(HERE / "workers" / "launched.py"),
        ],
        capture_output=True,
        text=True,
        timeout=380,
        env=env,
    )
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    assert "ok launched" in done.stdout


@pytest.mark.timeout(300)
def test_one_process_and_clear_prepare_errors(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env.update(_env(), ACCEL_USE_CPU="1", OMP_NUM_THREADS="1")
    done = subprocess.run(
        [
            sys.executable,
            str(HERE / "workers" / "single.py"),
            str(tmp_path),
            str(HERE / "configs" / "zero_stage2_config.json"),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
    )
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    assert "ok single" in done.stdout
