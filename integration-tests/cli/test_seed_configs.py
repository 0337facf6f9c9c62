"""The seed's example config files load unchanged and produce the expected launch (--dry_run:
no GPU here), or, for a plugin that is not installed, an error naming it."""

from __future__ import annotations

import importlib.util

import pytest


def _command(result) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return next(line for line in result.stdout.splitlines() if line.startswith("command: "))


def test_multi_gpu_yaml(run_accel, cli, tmp_path):
    (tmp_path / "train.py").write_text("")
    result = run_accel(
        "launch", "--config_file", str(cli.SEED / "seed_multi_gpu.yaml"), "--dry_run", "train.py"
    )
    command = _command(result)
    assert "-m torch.distributed.run --nproc_per_node 4 --standalone" in command
    assert "env: ACCEL_DISTRIBUTED_TYPE=MULTI_GPU" in result.stdout
    assert "env: ACCEL_MIXED_PRECISION=no" in result.stdout
    assert "CUDA_VISIBLE_DEVICES" not in result.stdout  # gpu_ids: all


@pytest.mark.parametrize("rank", [0, 1])
def test_multi_node_yamls(run_accel, cli, tmp_path, rank):
    (tmp_path / "train.py").write_text("")
    config = cli.SEED / f"seed_multinode_rank{rank}.yaml"
    command = _command(run_accel("launch", "--config_file", str(config), "--dry_run", "train.py"))
    expected = (
        f"--nproc_per_node 4 --nnodes 2 --node_rank {rank} --master_addr 192.168.20.1 "
        "--master_port 8080"
    )
    assert expected in command


def test_seed_fp16_yaml_and_flag_override(run_accel, cli, tmp_path):
    (tmp_path / "train.py").write_text("")
    config = str(cli.SEED / "seed_fp16.yaml")
    result = run_accel("launch", "--config_file", config, "--dry_run", "train.py")
    assert "env: ACCEL_MIXED_PRECISION=fp16" in result.stdout
    result = run_accel(
        "launch", "--config_file", config, "--mixed_precision", "bf16", "--cpu", "--dry_run",
        "train.py",
    )  # fmt: skip
    assert "env: ACCEL_MIXED_PRECISION=bf16" in result.stdout
    assert "env: ACCEL_DISTRIBUTED_TYPE=MULTI_CPU" in result.stdout  # --cpu outranks the file


def test_debug_yaml(run_accel, cli, tmp_path):
    (tmp_path / "train.py").write_text("")
    result = run_accel(
        "launch", "--config_file", str(cli.SEED / "seed_debug.yaml"), "--dry_run", "train.py"
    )
    assert "launcher: simple" in result.stdout
    assert "env: ACCEL_DEBUG_MODE=true" in result.stdout


@pytest.mark.parametrize(
    ("name", "package", "module"),
    [
        ("seed_fsdp.yaml", "accel-fsdp", "accel_fsdp"),
        ("seed_fsdp_full.yaml", "accel-fsdp", "accel_fsdp"),
        ("seed_deepspeed_zero3.yaml", "accel-deepspeed", "accel_deepspeed"),
        ("seed_deepspeed_zero2.yaml", "accel-deepspeed", "accel_deepspeed"),
        ("seed_deepspeed_config_file.yaml", "accel-deepspeed", "accel_deepspeed"),
        ("seed_megatron.yaml", "accel-megatron", "accel_megatron"),
        ("seed_fp8_te.yaml", "accel-fp8", "accel_fp8"),
        ("seed_fp8_msamp.yaml", "accel-fp8", "accel_fp8"),
    ],
)
def test_plugin_yamls(run_accel, cli, tmp_path, name, package, module):
    (tmp_path / "train.py").write_text("")
    result = run_accel(
        "launch", "--config_file", str(cli.SEED / name), "--dry_run", "train.py",
        plugins=None,
    )  # fmt: skip
    if importlib.util.find_spec(module) is None:
        assert result.returncode == 2, result.stdout + result.stderr
        assert package in result.stderr and "pip install" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    else:  # the plugin is installed: its section validates and the launch is planned
        assert result.returncode == 0, result.stdout + result.stderr
        assert "command: " in result.stdout


def test_sagemaker_yaml_loads_but_is_not_launched_locally(run_accel, cli, tmp_path):
    (tmp_path / "train.py").write_text("")
    config = str(cli.SEED / "seed_sagemaker.yaml")
    show = run_accel("config", "show", "--config_file", config)
    assert show.returncode == 0 and "AMAZON_SAGEMAKER" in show.stdout
    result = run_accel("launch", "--config_file", config, "train.py")
    assert result.returncode == 2 and "AMAZON_SAGEMAKER" in result.stderr
