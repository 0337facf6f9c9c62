"""``accel tpu-config`` and ``accel launch --tpu``: the commands built, and bad settings refused.

Runs ``accel`` in this process; nothing here starts the XLA runtime.
"""

from __future__ import annotations

import shlex
import sys

import pytest

SSH = "gcloud compute tpus tpu-vm ssh"


def _running(out: str) -> list[str]:
    assert out.startswith("Running "), out
    return shlex.split(out[len("Running ") :])


def test_tpu_config_debug_prints_the_pod_command(accel_cli):
    status, out, err = accel_cli(
        "tpu-config",
        "--tpu_name",
        "my-pod",
        "--tpu_zone",
        "us-central2-b",
        "--command",
        "echo",
        "hello world",
        "--command",
        "python3 -c 'import torch'",
        "--install_accel",
        "--debug",
    )
    assert status == 0, err
    assert _running(out) == [
        *SSH.split(),
        "my-pod",
        "--zone",
        "us-central2-b",
        "--command",
        "cd /usr/share; pip install -U accel-tpu; echo hello world; python3 -c 'import torch'",
        "--worker",
        "all",
    ]


def test_tpu_config_reads_the_config_file_and_uses_alpha(accel_cli, tmp_path):
    config = tmp_path / "tpu.yaml"
    config.write_text(
        "distributed_type: XLA\ntpu_name: pod-b\ntpu_zone: europe-west4-a\n"
        "commands:\n  - pip install datasets\n  - ls\n"
    )
    status, out, err = accel_cli(
        "tpu-config", "--config_file", str(config), "--use_alpha", "--debug"
    )
    assert status == 0, err
    argv = _running(out)
    assert argv[:3] == ["gcloud", "alpha", "compute"]
    assert argv[argv.index("--zone") + 1] == "europe-west4-a"
    assert "pod-b" in argv
    assert argv[argv.index("--command") + 1] == "cd /usr/share; pip install datasets; ls"


def test_tpu_config_command_file_and_version(accel_cli, tmp_path):
    script = tmp_path / "setup.sh"
    script.write_text("sudo apt-get update\n\nexport A=1\n")
    status, out, err = accel_cli(
        "tpu-config",
        "--tpu_name",
        "p1",
        "--tpu_zone",
        "us-east1-d",
        "--command_file",
        str(script),
        "--install_accelerate",
        "--accel_version",
        "0.1.0",
        "--debug",
    )
    assert status == 0, err
    argv = _running(out)
    assert argv[argv.index("--command") + 1] == (
        "cd /usr/share; pip install accel-tpu==0.1.0; sudo apt-get update; export A=1"
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--tpu_zone", "us-central2-b", "--command", "ls"], ["tpu_name is not set", "--tpu_name"]),
        (["--tpu_name", "pod", "--command", "ls"], ["tpu_zone is not set", "--tpu_zone"]),
        (["--tpu_name", "pod", "--tpu_zone", "us-central2-b"], ["--command", "--command_file"]),
        (
            ["--tpu_name", "My_Pod", "--tpu_zone", "us-central2-b", "--command", "ls"],
            ["'My_Pod'", "lowercase letters"],
        ),
        (
            ["--tpu_name", "pod", "--tpu_zone", "central", "--command", "ls"],
            ["'central'", "us-central2-b"],
        ),
        (
            ["--tpu_name", "pod", "--tpu_zone", "us-central2-b", "--command_file", "missing.txt"],
            ["command_file missing.txt", "cannot read"],
        ),
        (
            ["--tpu_name", "p", "--tpu_zone", "us-central2-b", "--command", "ls"]
            + ["--install_accel", "--accel_version=-U"],
            ["--accel_version", "'-U'"],
        ),
        (["--tpu_name", "p", "--config_file", "nope.yaml", "--command", "ls"], ["nope.yaml"]),
    ],
)
def test_tpu_config_bad_settings_exit_2_with_one_line(accel_cli, argv, expected):
    status, out, err = accel_cli("tpu-config", *argv, "--debug")
    assert status == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accel tpu-config: error:"), err
    for text in expected:
        assert text in lines[0], (text, lines[0])


def test_tpu_config_is_listed_as_a_plugin_command(accel_cli):
    status, out, _ = accel_cli("--help")
    assert status == 0
    assert "tpu-config" in out and "(plugin)" in out


def _dry_run(accel_cli, *argv: str) -> tuple[str, list[str], dict[str, str]]:
    status, out, err = accel_cli("launch", "--dry_run", *argv)
    assert status == 0, err
    lines = out.splitlines()
    launcher = lines[0].split(": ", 1)[1]
    command = shlex.split(lines[1].split(": ", 1)[1])
    env = dict(line[len("env: ") :].split("=", 1) for line in lines[2:])
    return launcher, command, env


def test_launch_tpu_spawns_through_the_xla_launcher(accel_cli, tmp_path):
    (tmp_path / "train.py").write_text("def run(): pass\n")
    launcher, command, env = _dry_run(
        accel_cli,
        "--tpu",
        "--num_processes",
        "8",
        "--mixed_precision",
        "bf16",
        "--downcast_bf16",
        "yes",
        "--main_training_function",
        "run",
        "--env",
        "MY_FLAG=1",
        "train.py",
        "--lr",
        "3",
    )
    assert launcher == "xla"
    assert command == [
        sys.executable,
        "-m",
        "accel_tpu.spawn",
        "--main_training_function",
        "run",
        "--num_processes",
        "8",
        "train.py",
        "--lr",
        "3",
    ]
    assert env["ACCEL_DISTRIBUTED_TYPE"] == "XLA"
    assert env["ACCEL_MIXED_PRECISION"] == "bf16"
    assert (env["XLA_DOWNCAST_BF16"], env["XLA_USE_BF16"], env["MY_FLAG"]) == ("1", "0", "1")
    assert "CPU_NUM_DEVICES" not in env  # only with PJRT_DEVICE=CPU


def test_launch_distributed_type_tpu_from_an_accelerate_config(accel_cli, tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text("def main(): pass\n")
    (tmp_path / "c.yaml").write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: TPU\nnum_processes: 2\n"
        "mixed_precision: 'no'\ndowncast_bf16: 'no'\ntpu_env: []\ntpu_use_cluster: false\n"
        "tpu_use_sudo: false\nmain_training_function: main\n"
    )
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    launcher, command, env = _dry_run(accel_cli, "--config_file", "c.yaml", "-m", "train")
    assert launcher == "xla"
    assert command[2:] == [
        "accel_tpu.spawn",
        "--main_training_function",
        "main",
        "--num_processes",
        "2",
        "--module",
        "train",
    ]
    assert env["CPU_NUM_DEVICES"] == "2"


def test_launch_tpu_cluster_runs_accel_launch_on_every_worker(accel_cli, tmp_path):
    (tmp_path / "train.py").write_text("def main(): pass\n")
    launcher, command, _ = _dry_run(
        accel_cli,
        "--tpu",
        "--tpu_cluster",
        "--tpu_name",
        "pod-a",
        "--tpu_zone",
        "us-central2-b",
        "--tpu_use_sudo",
        "--env",
        "A=b c",
        "--num_processes",
        "4",
        "train.py",
        "x y",
    )
    assert launcher == "tpu_pod"
    assert command[:8] == [*SSH.split(), "pod-a", "--zone", "us-central2-b"]
    assert command[-2:] == ["--worker", "all"]
    remote = command[command.index("--command") + 1]
    cd, _, launch = remote.partition("; ")
    assert shlex.split(cd) == ["cd", str(tmp_path)]
    assert shlex.split(launch) == [
        "sudo",
        "env",
        "A=b c",
        "accel",
        "launch",
        "--tpu",
        "--no_tpu_cluster",
        "--num_processes",
        "4",
        "--mixed_precision",
        "no",
        "--downcast_bf16",
        "no",
        "--main_training_function",
        "main",
        "train.py",
        "x y",
    ]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--tpu", "--mixed_precision", "fp16"], ["mixed_precision fp16", "bf16"]),
        (["--tpu", "--tpu_cluster", "--tpu_zone", "us-central2-b"], ["tpu_name is not set"]),
        (["--tpu", "--tpu_cluster", "--tpu_name", "p"], ["tpu_zone is not set"]),
        (["--tpu", "--env", "NOEQUALS"], ["tpu_env entry 'NOEQUALS'", "NAME=value"]),
        (["--tpu", "--no_python"], ["--no_python", "--tpu"]),
        (["--tpu", "--main_training_function", "not a name"], ["main_training_function"]),
        (
            ["--tpu", "--num_machines", "2", "--main_process_ip", "10.0.0.1"],
            ["num_machines", "--tpu_cluster"],
        ),
    ],
)
def test_launch_bad_tpu_settings_exit_2_with_one_line(accel_cli, tmp_path, argv, expected):
    (tmp_path / "train.py").write_text("def main(): pass\n")
    status, out, err = accel_cli("launch", "--dry_run", *argv, "train.py")
    assert status == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0], err
    for text in expected:
        assert text in lines[0], (text, lines[0])


def test_config_questions_write_a_tpu_pod_config(tmp_path):
    from accel.plugins import reset_plugin_manager
    from accel_cli.questions import ScriptedAsk, ask_questions

    reset_plugin_manager()
    ask = ScriptedAsk(
        {
            "mixed_precision": "bf16",
            "use_tpu": True,
            "main_training_function": "train",
            "downcast_bf16": True,
            "tpu_use_cluster": True,
            "tpu_name": "pod-c",
            "tpu_zone": "us-central2-b",
            "tpu_use_sudo": True,
            "commands": "pip install datasets; ls",
            "tpu_env": "A=1 B=2",
            "num_processes": 8,
        }
    )
    config = ask_questions(ask)
    assert config["distributed_type"] == "XLA"
    assert (config["main_training_function"], config["downcast_bf16"]) == ("train", "yes")
    assert (config["tpu_name"], config["tpu_zone"], config["tpu_use_sudo"]) == (
        "pod-c",
        "us-central2-b",
        True,
    )
    assert config["commands"] == ["pip install datasets", "ls"]
    assert config["tpu_env"] == ["A=1", "B=2"]
    from accel.config.files import validate

    validate(config, "questions")  # every key is one Accelerate's config file knows


def test_launch_tpu_script_without_its_function_fails_clearly(tmp_path):
    """A real ``accel launch --tpu``: the spawn module reports the missing function, no traceback."""
    from tpu_testing import ACCEL, clean_env, run_command

    (tmp_path / "train.py").write_text("def train():\n    pass\n")
    proc = run_command(
        [str(ACCEL), "launch", "--tpu", "train.py"],
        clean_env(tmp_path, PJRT_DEVICE="CPU"),
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "train.py has no function 'main'" in last and "main_training_function" in last, last
