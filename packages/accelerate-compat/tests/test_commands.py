"""The ``accelerate`` command and ``accelerate.commands.{config,launch,env}`` over accel's CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import json, os, sys
names = ["ACCEL_MIXED_PRECISION", "ACCELERATE_MIXED_PRECISION", "ACCELERATE_USE_CPU"]
json.dump({n: os.environ.get(n) for n in names}, open(sys.argv[1], "w"))
"""


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def test_accelerate_command_is_accels_cli(subprocess_env):
    result = subprocess.run(
        [_bin("accelerate"), "--help"],
        capture_output=True,
        text=True,
        env=subprocess_env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "launch" in result.stdout and "config" in result.stdout


def test_accelerate_bad_flag_is_one_line_exit_2(subprocess_env, tmp_path):
    script = tmp_path / "s.py"
    script.write_text("pass\n")
    result = subprocess.run(
        [_bin("accelerate"), "launch", "--num_procesess", "2", str(script)],
        capture_output=True,
        text=True,
        env=subprocess_env,
        timeout=120,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "--num_processes" in result.stderr


def test_load_config_from_file(tmp_path):
    from accelerate.commands.config import default_config_file, load_config_from_file

    assert isinstance(default_config_file, str) and default_config_file.endswith(
        "default_config.yaml"
    )
    path = tmp_path / "c.yaml"
    path.write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\nmixed_precision: bf16\n"
    )
    config = load_config_from_file(str(path))
    assert config.mixed_precision == "bf16"
    assert config.to_dict()["distributed_type"] == "NO"
    with pytest.raises(FileNotFoundError):
        load_config_from_file(str(tmp_path / "missing.yaml"))


def test_launch_command_runs_accels_launcher(tmp_path, monkeypatch):
    """TRL's path: ``launch_command(launch_command_parser().parse_args([...]))``."""
    from accel.testing.processes import clean_environment
    from accelerate.commands.launch import launch_command, launch_command_parser

    for key in list(__import__("os").environ):
        monkeypatch.delenv(key)
    for key, value in clean_environment().items():
        monkeypatch.setenv(key, value)
    script = tmp_path / "show_env.py"
    script.write_text(SCRIPT)
    out = tmp_path / "env.json"
    args = launch_command_parser().parse_args(
        ["--num_processes", "1", "--cpu", "--mixed_precision", "bf16", str(script), str(out)]
    )
    assert args.mixed_precision == "bf16"
    launch_command(args)
    seen = json.loads(out.read_text())
    assert seen == {
        "ACCEL_MIXED_PRECISION": "bf16",
        "ACCELERATE_MIXED_PRECISION": "bf16",
        "ACCELERATE_USE_CPU": "true",
    }
    failing = tmp_path / "fail.py"
    failing.write_text("raise SystemExit(3)\n")
    with pytest.raises(subprocess.CalledProcessError):
        launch_command(
            launch_command_parser().parse_args(["--num_processes", "1", "--cpu", str(failing)])
        )


def test_env_command(capsys):
    from accelerate.commands.env import env_command

    assert env_command() == 0
    assert "PyTorch version" in capsys.readouterr().out


def test_accelerate_to_fsdp2_and_hyphenated_launch_flags(tmp_path, monkeypatch):
    import yaml
    from accelerate.commands.accelerate_cli import main
    from accelerate.commands.launch import launch_command_parser

    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path / "config"))
    source = tmp_path / "fsdp1.yaml"
    source.write_text(
        yaml.safe_dump(
            {"distributed_type": "FSDP", "fsdp_config": {"fsdp_sharding_strategy": "FULL_SHARD"}}
        )
    )
    with pytest.raises(SystemExit) as exc:
        main(["to-fsdp2", "--config_file", str(source), "--overwrite"])
    assert exc.value.code == 0
    assert yaml.safe_load(source.read_text())["fsdp_config"] == {
        "fsdp_reshard_after_forward": True,
        "fsdp_version": 2,
    }
    script = tmp_path / "s.py"
    script.write_text("pass\n")
    args = launch_command_parser().parse_args(["--num-processes", "2", str(script)])
    assert args.num_processes == "2"


RANK_SCRIPT = """
import json, os, sys
out = sys.argv[1]
json.dump({"world": os.environ.get("WORLD_SIZE", "1"), "argv": sys.argv[2:]},
          open(os.path.join(out, f"rank{os.environ.get('RANK', '0')}.json"), "w"))
"""

EDIT_THEN_LAUNCH = """
import sys
from accelerate.commands.launch import launch_command, launch_command_parser
script, out = sys.argv[1:3]
args = launch_command_parser().parse_args(["--num_processes", "1", "--cpu", script, out, "old"])
args.num_processes = 2                       # as TRL and other CLIs set fields after parse_args()
args.training_script_args = [out, "new", "--lr", "-1"]
launch_command(args)
"""

SUBPARSERS_LAUNCH = """
import argparse, sys
from accelerate.commands.launch import launch_command_parser
script, out = sys.argv[1:3]
cli = argparse.ArgumentParser(prog="tool")
subparsers = cli.add_subparsers(dest="command")
launch_parser = launch_command_parser(subparsers)
assert subparsers.choices["launch"] is launch_parser
args = cli.parse_args(["launch", "--cpu", "--num-processes", "1", script, out, "sub"])
assert args.command == "launch" and args.num_processes == "1"
args.func(args)
"""


def test_launch_command_honours_fields_set_after_parsing(tmp_path):
    """``launch_command`` launches the namespace's current values, not the argv it was parsed from."""
    from accel.testing.processes import clean_environment, run_command

    script, out = tmp_path / "ranks.py", tmp_path / "out"
    script.write_text(RANK_SCRIPT)
    out.mkdir()
    driver = tmp_path / "driver.py"
    driver.write_text(EDIT_THEN_LAUNCH)
    run_command([sys.executable, str(driver), str(script), str(out)], env=clean_environment())
    seen = {p.name: json.loads(p.read_text()) for p in out.iterdir()}
    assert sorted(seen) == ["rank0.json", "rank1.json"]
    assert all(v == {"world": "2", "argv": ["new", "--lr", "-1"]} for v in seen.values())


def test_launch_command_parser_adds_launch_to_subparsers(tmp_path):
    """``launch_command_parser(subparsers)`` adds ``launch`` (with ``func``) to a CLI's subparsers."""
    from accel.testing.processes import clean_environment, run_command

    script, out = tmp_path / "ranks.py", tmp_path / "out"
    script.write_text(RANK_SCRIPT)
    out.mkdir()
    driver = tmp_path / "driver.py"
    driver.write_text(SUBPARSERS_LAUNCH)
    run_command([sys.executable, str(driver), str(script), str(out)], env=clean_environment())
    assert json.loads((out / "rank0.json").read_text()) == {"world": "1", "argv": ["sub"]}


def test_launch_namespace_has_accelerates_cpu_field(tmp_path):
    from accelerate.commands.launch import launch_argv, launch_command_parser

    script = tmp_path / "s.py"
    script.write_text("pass\n")
    args = launch_command_parser().parse_args(["--cpu", str(script)])
    assert args.cpu is True
    args.cpu = False
    args.mixed_precision = "bf16"
    assert launch_argv(args) == ["--mixed_precision=bf16", str(script)]
    args.cpu = True
    assert "--cpu" in launch_argv(args)


CLUSTER_YAML = """\
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
mixed_precision: bf16
num_processes: 2
fsdp_config:
  fsdp_sharding_strategy: FULL_SHARD
"""


def test_config_args_module_has_accelerates_names(tmp_path):
    """``accelerate.commands.config.config_args``: Accelerate's module path, names and fields."""
    from accelerate.commands import config
    from accelerate.commands.config.config_args import (
        ClusterConfig,
        default_config_file,
        load_config_from_file,
    )

    assert default_config_file == config.default_config_file
    assert config.load_config_from_file is load_config_from_file
    path = tmp_path / "c.yaml"
    path.write_text(CLUSTER_YAML)
    loaded = load_config_from_file(str(path))
    assert isinstance(loaded, ClusterConfig)
    assert loaded.distributed_type == "FSDP" and loaded.num_processes == 2
    assert loaded.mixed_precision == "bf16"
    assert loaded.fsdp_config == {"fsdp_sharding_strategy": "FULL_SHARD"}
    assert loaded.deepspeed_config == {} and loaded.megatron_lm_config == {}
    assert loaded.machine_rank == 0 and loaded.num_machines == 1
    assert loaded.main_process_port is None and loaded.rdzv_backend == "static"
    assert loaded.to_dict()["distributed_type"] == "FSDP"
    assert "deepspeed_config" not in loaded.to_dict()  # empty sections are left out
    no_type = tmp_path / "n.yaml"
    no_type.write_text("distributed_type: 'NO'\n")
    assert load_config_from_file(str(no_type)).num_processes == 1


def test_loaded_config_unknown_attribute_is_an_attribute_error(tmp_path):
    """A typo raises AttributeError (as on a dataclass) instead of reading as None."""
    from accelerate.commands.config import load_config_from_file

    path = tmp_path / "c.yaml"
    path.write_text(CLUSTER_YAML + "ray_config:\n  ray_num_to_keep: 3\n")
    loaded = load_config_from_file(str(path))
    with pytest.raises(AttributeError, match="mixed_precison"):
        loaded.mixed_precison  # noqa: B018
    assert not hasattr(loaded, "no_such_setting")
    assert getattr(loaded, "num_procesess", "fallback") == "fallback"
    # accel's own keys keep working: from the file, else their default
    assert loaded.ray_config == {"ray_num_to_keep": 3}
    assert loaded.slurm_config == {}
    assert loaded.to_dict()["ray_config"] == {"ray_num_to_keep": 3}


def test_sagemaker_config_file(tmp_path):
    from accelerate.commands.config.config_args import SageMakerConfig, load_config_from_file

    path = tmp_path / "s.yaml"
    path.write_text(
        "compute_environment: AMAZON_SAGEMAKER\ndistributed_type: 'NO'\n"
        "ec2_instance_type: ml.p3.2xlarge\niam_role_name: role\nmixed_precision: fp16\n"
    )
    loaded = load_config_from_file(str(path))
    assert isinstance(loaded, SageMakerConfig)
    assert loaded.ec2_instance_type == "ml.p3.2xlarge" and loaded.region == "us-east-1"
    assert loaded.distributed_type == "NO" and loaded.to_dict()["iam_role_name"] == "role"
