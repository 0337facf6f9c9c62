"""``accel launch`` flags, the multi-node launcher's argv, ``accel config`` questions, import cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from accel.errors import ConfigError
from accel_deepspeed.launcher import RUNNER_MODULE, DeepSpeedMultinodeLauncher

SEED_CONFIGS = Path(__file__).parents[3] / "integration-tests" / "deepspeed" / "configs"


def _config(launcher: str | None = "pdsh", **section) -> dict:
    if launcher is not None:
        section["deepspeed_multinode_launcher"] = launcher
    return {
        "distributed_type": "DEEPSPEED",
        "num_machines": 2,
        "num_processes": 16,
        "nproc_per_node": 8,
        "machine_rank": 1,
        "main_process_ip": "10.0.0.1",
        "main_process_port": 29501,
        "deepspeed_config": section,
    }


def test_multinode_argv_for_each_launcher():
    launcher = DeepSpeedMultinodeLauncher()
    head = [sys.executable, "-m", RUNNER_MODULE]
    tail = ["--master_addr", "10.0.0.1", "--master_port", "29501", "train.py", "--lr", "1"]
    for name in ("pdsh", "openmpi", "mvapich", "mpich", "slurm"):
        config = _config(name, deepspeed_hostfile="/job/hostfile")
        assert launcher.claims(config)
        assert launcher.command(config, ["train.py", "--lr", "1"]) == [
            *head,
            "--hostfile",
            "/job/hostfile",
            "--launcher",
            name,
            "--num_gpus",
            "8",
            *tail,
        ]
    config = _config(None)  # pdsh is the default
    assert launcher.command(config, ["train.py"])[3:5] == ["--launcher", "pdsh"]
    config = _config("nossh", deepspeed_inclusion_filter="worker-0@worker-1:0,2")
    assert launcher.command(config, ["train.py"]) == [
        *head,
        "--node_rank",
        "1",
        "--no_ssh",
        "--include",
        "worker-0@worker-1:0,2",
        *tail[:4],
        "train.py",
    ]
    config = _config(
        "pdsh", deepspeed_exclusion_filter="worker-1:0", deepspeed_inclusion_filter="x"
    )
    argv = launcher.command({**config, "module": True}, ["pkg.train"])
    assert argv[argv.index("--exclude") + 1] == "worker-1:0" and "--include" not in argv
    assert argv[-2:] == ["--module", "pkg.train"]


def test_launcher_claims_only_multinode_non_standard():
    launcher = DeepSpeedMultinodeLauncher()
    assert not launcher.claims(_config("standard"))
    assert not launcher.claims({**_config("pdsh"), "num_machines": 1})
    assert not launcher.claims({**_config("pdsh"), "distributed_type": "MULTI_GPU"})
    with pytest.raises(ConfigError, match="deepspeed_multinode_launcher='ssh'"):
        launcher.claims(_config("ssh"))


def test_launch_flags_reach_the_plugin(monkeypatch, tmp_path):
    from accel_cli.launch import plan
    from accel_deepspeed import DeepSpeedPlugin

    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path))
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    p = plan(
        [
            "--use_deepspeed",
            "--cpu",
            "--num_processes=2",
            "--zero_stage=3",
            "--gradient_accumulation_steps=1",
            "--gradient_clipping=1",
            "--zero3_init_flag=True",
            "--zero3_save_16bit_model=True",
            "--offload_optimizer_device=cpu",
            "--offload_param_device=cpu",
            str(script),
        ]
    )
    assert p["launcher"].name == "torchrun"
    env = p["env"]
    assert env["ACCEL_DISTRIBUTED_TYPE"] == "DEEPSPEED" and env["DS_ACCELERATOR"] == "cpu"
    monkeypatch.setenv("ACCEL_LAUNCH_CONFIG", env["ACCEL_LAUNCH_CONFIG"])
    plugin = DeepSpeedPlugin()
    assert (plugin.zero_stage, plugin.offload_optimizer_device, plugin.offload_param_device) == (
        3,
        "cpu",
        "cpu",
    )
    assert plugin.zero3_init_flag and plugin.zero3_save_16bit_model
    assert plugin.deepspeed_config["gradient_clipping"] == 1.0


def test_seed_yaml_with_config_file_and_multinode_plan(monkeypatch, tmp_path):
    from accel_cli.launch import plan
    from accel_deepspeed import DeepSpeedPlugin

    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path))
    yaml_text = (SEED_CONFIGS / "zero2_config_file.yaml").read_text()
    yaml_text = yaml_text.replace(
        "/home/ubuntu/accelerate/examples/deepspeed_config_templates", str(SEED_CONFIGS)
    )
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml_text)
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    p = plan(["--config_file", str(config_file), str(script)])
    launched = json.loads(p["env"]["ACCEL_LAUNCH_CONFIG"])
    monkeypatch.setenv("ACCEL_LAUNCH_CONFIG", json.dumps(launched))
    plugin = DeepSpeedPlugin()
    assert plugin.zero_stage == 2 and plugin.get_value("optimizer.type") == "AdamW"
    p = plan(
        [
            "--config_file",
            str(config_file),
            "--num_machines=2",
            "--num_processes=4",
            "--main_process_ip=10.0.0.1",
            "--deepspeed_multinode_launcher=openmpi",
            "--deepspeed_hostfile=/job/hostfile",
            str(script),
        ]
    )
    assert p["launcher"].name == "deepspeed"
    assert p["command"][2:7] == [
        RUNNER_MODULE,
        "--hostfile",
        "/job/hostfile",
        "--launcher",
        "openmpi",
    ]


def test_bad_flags_exit_2_with_one_line(tmp_path):
    accel = Path(sys.executable).with_name("accel")
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    env = {"ACCEL_CONFIG_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for flags, words in (
        (["--zero_stage=4"], "zero_stage"),
        (["--zero_stage=0", "--offload_optimizer_device=cpu"], "offload_optimizer_device"),
    ):
        done = subprocess.run(
            [str(accel), "launch", "--use_deepspeed", *flags, str(script)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and "Traceback" not in done.stderr, lines


def test_config_questions():
    from accel_cli.questions import ScriptedAsk
    from accel_deepspeed.plugin import accel_config_questions

    config = {"distributed_type": "MULTI_GPU", "num_machines": 2}
    ask = ScriptedAsk(
        {
            "use_deepspeed": True,
            "use_deepspeed_config_file": False,
            "deepspeed_config.zero_stage": "3",
            "deepspeed_config.offload_optimizer_device": "cpu",
            "deepspeed_config.offload_param_device": "nvme",
            "deepspeed_config.offload_param_nvme_path": "/nvme",
            "deepspeed_config.gradient_accumulation_steps": 2,
            "use_gradient_clipping": True,
            "deepspeed_config.gradient_clipping": "1.0",
            "deepspeed_config.zero3_save_16bit_model": True,
            "deepspeed_config.zero3_init_flag": True,
            "deepspeed_config.deepspeed_multinode_launcher": "slurm",
            "deepspeed_config.deepspeed_hostfile": "/job/hostfile",
        }
    )
    accel_config_questions(ask=ask, config=config)
    assert config["distributed_type"] == "DEEPSPEED"
    section = config["deepspeed_config"]
    assert section["zero_stage"] == 3 and section["offload_param_nvme_path"] == "/nvme"
    assert (
        section["gradient_clipping"] == 1.0 and section["deepspeed_multinode_launcher"] == "slurm"
    )
    from accel_deepspeed.config import validate_section

    assert validate_section(section) == []


def test_plugin_module_is_light():
    code = (
        "import sys, accel, accel_deepspeed, accel_deepspeed.plugin, accel_deepspeed.launcher;"
        "from accel import DeepSpeedPlugin, DummyOptim, DummyScheduler;"
        "from accel.utils import HfDeepSpeedConfig;"
        "heavy = [m for m in ('torch', 'deepspeed') if m in sys.modules]; print(heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("zero2_plugin.yaml", (2, "none", "none", False, False)),
        ("zero3_offload_plugin.yaml", (3, "cpu", "cpu", True, True)),
    ],
)
def test_seed_plugin_yamls(monkeypatch, tmp_path, name, expected):
    from accel_cli.launch import plan
    from accel_deepspeed import DeepSpeedPlugin

    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path))
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    p = plan(["--config_file", str(SEED_CONFIGS / name), "--cpu", str(script)])
    assert p["env"]["ACCEL_DISTRIBUTED_TYPE"] == "DEEPSPEED" and p["launcher"].name == "torchrun"
    monkeypatch.setenv("ACCEL_LAUNCH_CONFIG", p["env"]["ACCEL_LAUNCH_CONFIG"])
    plugin = DeepSpeedPlugin()
    got = (
        plugin.zero_stage,
        plugin.offload_optimizer_device,
        plugin.offload_param_device,
        plugin.zero3_init_flag,
        plugin.zero3_save_16bit_model,
    )
    assert got == expected
    assert plugin.deepspeed_config["gradient_clipping"] == 1.0
    assert plugin.deepspeed_config["gradient_accumulation_steps"] == 1
