"""accel on XLA devices for real: torch_xla 2.9 on PJRT's CPU devices (or a TPU).

Each check runs in its own process (the XLA runtime starts once per process, and SPMD
or the number of devices must be chosen before it starts). ``TEST_PJRT_DEVICE=TPU``
runs the same tests on a TPU host; on CPU, collectives between replicas abort in
torch_xla itself (pytorch/xla#5005, tracked in #9089), so that test is skipped there.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
from tpu_testing import WORKERS, clean_env, last_json, run_command

DEVICE = os.environ.get("TEST_PJRT_DEVICE", "CPU")
TIMEOUT = 420
COLLECTIVES_ON_CPU = (
    "collectives between XLA replicas abort on PJRT's CPU devices (upstream torch_xla "
    "limitation pytorch/xla#5005, tracked in #9089): needs a TPU (TEST_PJRT_DEVICE=TPU)"
)

pytest.importorskip(
    "torch_xla",
    reason="needs torch_xla: runs in packages/accel-tpu/xla-env (bash .ci/after.d/tpu.sh)",
)


def _env(tmp_path, **extra: str) -> dict[str, str]:
    return clean_env(tmp_path, PJRT_DEVICE=DEVICE, **extra)


def test_training_on_one_xla_device(tmp_path):
    """Loss goes down; bf16, tied weights, collectives of one replica, checkpoints."""
    proc = run_command(
        [sys.executable, str(WORKERS / "single_device.py"), str(tmp_path / "ckpt")],
        _env(tmp_path, ACCEL_DISTRIBUTED_TYPE="XLA"),
        TIMEOUT,
    )
    result = last_json(proc)
    losses = result["losses"]
    assert losses[-1] < losses[0] / 4, losses
    assert result["bf16_inner_dtype"] == "torch.bfloat16"
    assert "fp16" in result["fp16_error"]
    assert "tie_weights()" in result["tie_warning"]
    assert (tmp_path / "ckpt" / "model.safetensors").is_file()
    assert (tmp_path / "ckpt" / "optimizer.bin").is_file()


@pytest.mark.skipif(DEVICE != "CPU", reason="2 virtual devices are a PJRT CPU setting")
def test_spmd_sharding_over_two_virtual_devices(tmp_path):
    proc = run_command(
        [sys.executable, str(WORKERS / "spmd.py")],
        _env(tmp_path, ACCEL_DISTRIBUTED_TYPE="XLA", CPU_NUM_DEVICES="2"),
        TIMEOUT,
    )
    result = last_json(proc)
    assert result["specs"] == ["{devices=[2,1]0,1}"]
    assert result["losses"][-1] < result["losses"][0] / 4


def _reports(folder) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def test_accel_launch_tpu_spawns_two_replicas(tmp_path):
    """``accel launch --tpu --num_processes 2``: xmp.spawn runs ``main`` once per device."""
    out = tmp_path / "reports"
    out.mkdir()
    accel = os.path.join(os.path.dirname(sys.executable), "accel")
    proc = run_command(
        [accel, "launch", "--tpu", "--num_processes", "2", "--mixed_precision", "bf16"]
        + [str(WORKERS / "replica_script.py"), str(out)],
        _env(tmp_path),
        TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    reports = _reports(out)
    assert [r["process_index"] for r in reports] == [0, 1], reports
    assert {r["device"] for r in reports} == {"xla:0", "xla:1"}
    for report in reports:
        assert report["num_processes"] == 2
        assert report["distributed_type"] == "XLA"
        assert report["mixed_precision"] == "bf16"
        assert report["argv"] == [str(out)]
        assert report["loss_finite"]


def test_notebook_launcher_on_xla(tmp_path):
    """``accel.notebook_launcher`` forks the replicas through accel-tpu on XLA."""
    out = tmp_path / "reports"
    out.mkdir()
    proc = run_command(
        [sys.executable, str(WORKERS / "notebook.py"), str(out)], _env(tmp_path), TIMEOUT
    )
    result = last_json(proc)
    assert result["ordinals"] == [0, 1]
    reports = _reports(out)
    assert {r["device"] for r in reports} == {"xla:0", "xla:1"}
    assert all(r["num_processes"] == 2 and r["mixed_precision"] == "bf16" for r in reports)
    assert "restart the notebook" in result["refused"]


@pytest.mark.skipif(DEVICE == "CPU", reason=COLLECTIVES_ON_CPU)
def test_collectives_between_two_replicas(tmp_path):
    out = tmp_path / "reports"
    out.mkdir()
    accel = os.path.join(os.path.dirname(sys.executable), "accel")
    proc = run_command(
        [accel, "launch", "--tpu", "--num_processes", "2"]
        + [str(WORKERS / "collectives.py"), str(out)],
        _env(tmp_path),
        TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    reports = _reports(out)
    assert len(reports) >= 2
    assert reports[0]["firsts"] != reports[1]["firsts"]  # each replica got its own shard
