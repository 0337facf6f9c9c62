"""An Accelerate MULTI_GPU config with `use_cpu: true` runs its processes on CPU (issue 19).

What users write to try a GPU config on a laptop: Accelerate lets use_cpu win and launches
num_processes CPU processes; accel does the same, with a note instead of a refusal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RANKS = str(Path(__file__).parent / "scripts" / "ranks.py")

CONFIG = """\
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: MULTI_GPU
downcast_bf16: 'no'
enable_cpu_affinity: false
gpu_ids: all
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


@pytest.mark.timeout(240)
def test_multi_gpu_config_with_use_cpu_launches_two_cpu_processes(run_accel, tmp_path):
    config = tmp_path / "default_config.yaml"
    config.write_text(CONFIG)
    out = tmp_path / "out"
    out.mkdir()
    result = run_accel("launch", "--config_file", str(config), RANKS, str(out), timeout=220)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "MULTI_GPU" in result.stderr and "on CPU" in result.stderr  # the note says what it did
    records = [json.loads(p.read_text()) for p in sorted(out.glob("rank*-restart0.json"))]
    assert [r["rank"] for r in records] == [0, 1], records
    for r in records:
        assert r["world"] == 2 and r["sum"] == 3.0, r
        assert r["device"] == "cpu" and r["backend"] == "gloo", r
        assert r["env"]["ACCEL_DISTRIBUTED_TYPE"] == "MULTI_CPU", r["env"]


def test_cpu_and_multi_gpu_flags_together_are_still_refused(run_accel, tmp_path):
    (tmp_path / "s.py").write_text("")
    result = run_accel("launch", "--cpu", "--multi_gpu", "--dry_run", "s.py")
    assert result.returncode != 0 and "contradict" in result.stderr, result.stderr
