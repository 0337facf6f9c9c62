"""The `accel` subcommands, run as the real executable (single process; no torchrun here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ACCEL = Path(sys.executable).with_name("accel")
DATA = Path(__file__).parent / "data"


def test_top_level_help_lists_commands(accel):
    out = accel("--help")
    assert out.returncode == 0
    for name in ("config", "env", "launch", "test", "estimate-memory", "merge-weights", "plugins"):
        assert f"  {name}" in out.stdout
    assert accel("--version").stdout.startswith("accel ")


def test_launch_help_shows_seed_flags_but_no_absent_plugin_flags(accel):
    out = accel("launch", "--help")
    assert out.returncode == 0
    for flag in (
        "--config_file", "--cpu", "--multi_gpu", "--num_processes", "--num_machines",
        "--machine_rank", "--main_process_ip", "--main_process_port", "--mixed_precision",
        "--gpu_ids", "--debug", "--same_network", "--rdzv_backend", "--max_restarts",
        "--monitor_interval", "--module", "--no_python", "--gradient_accumulation_steps",
        "--dynamo_backend", "--nproc_per_node",
    ):  # fmt: skip
        assert flag in out.stdout, flag
    assert "--use_fsdp" not in out.stdout and "--zero_stage" not in out.stdout


def _help_modules(clean_env, plugins: str | None, tmp_path: Path) -> list[str]:
    code = (
        "import sys, io, contextlib\n"
        "from accel_cli.main import run\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        run(['launch', '--help'])\n    except SystemExit:\n        pass\n"
        "print(' '.join(sorted(m for m in ('torch', 'numpy', 'yaml', 'questionary') "
        "if m in sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path, plugins),
        timeout=120,
        check=True,
    )
    return out.stdout.split()


def test_launch_help_is_torch_free(clean_env, tmp_path):
    assert _help_modules(clean_env, "", tmp_path) == []


def test_launch_help_is_torch_free_with_every_installed_plugin(clean_env, tmp_path):
    assert _help_modules(clean_env, None, tmp_path) == []


def test_single_process_runs_script_with_accel_env(accel, script):
    out = accel(
        "launch", "--mixed_precision", "bf16", "--debug", "--gradient_accumulation_steps", "4",
        str(script), "a", "--b", "--num_processes", "7",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["argv"] == ["a", "--b", "--num_processes", "7"]  # script args untouched
    env = got["env"]
    assert env["ACCEL_MIXED_PRECISION"] == "bf16"
    assert env["ACCEL_DEBUG_MODE"] == "true"
    assert env["ACCEL_GRADIENT_ACCUMULATION_STEPS"] == "4"
    assert env["ACCEL_DISTRIBUTED_TYPE"] == "NO"
    assert got["config"]["mixed_precision"] == "bf16"


def test_single_process_exit_code_propagates(accel, tmp_path):
    (tmp_path / "fail.py").write_text("import sys\nsys.exit(3)\n")
    assert accel("launch", "fail.py").returncode == 3


def test_module_and_no_python(accel, tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text("import sys\nprint('module ran', sys.argv[1:])\n")
    out = accel("launch", "-m", "mypkg.train", "x")
    assert out.returncode == 0 and "module ran ['x']" in out.stdout, out.stderr
    out = accel("launch", "--no_python", "echo", "plain", "program")
    assert out.returncode == 0 and out.stdout.strip() == "plain program"


def test_dry_run_two_processes_uses_torchrun(accel, script):
    out = accel(
        "launch", "--cpu", "--num_processes", "2", "--max_restarts", "1", "--dry_run", str(script)
    )
    assert out.returncode == 0, out.stderr
    command = next(line for line in out.stdout.splitlines() if line.startswith("command: "))
    assert "-m torch.distributed.run --nproc_per_node 2 --standalone --max_restarts 1" in command
    assert "--module accel.launchers.worker --script" in command
    assert "env: ACCEL_DISTRIBUTED_TYPE=MULTI_CPU" in out.stdout
    assert "env: ACCEL_USE_CPU=true" in out.stdout


def test_dry_run_elastic_range_gives_each_rendezvous_round_its_own_store(
    accel, script, monkeypatch
):
    """``--nnodes 1:2``: c10d, and TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 for the agent (a node
    joining a running group would wait forever on torch's shared store); a value the
    environment sets is kept, and a static job gets none."""
    monkeypatch.delenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", raising=False)
    args = ("launch", "--cpu", "--nnodes", "1:2", "--nproc_per_node", "1", "--dry_run")
    out = accel(*args, "--main_process_port", "29411", str(script))
    assert out.returncode == 0, out.stderr
    command = next(line for line in out.stdout.splitlines() if line.startswith("command: "))
    assert "--nnodes 1:2 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:29411" in command
    assert "env: TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" in out.stdout.splitlines()
    kept = accel(*args, str(script), env={"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "0"})
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in kept.stdout  # the environment's own
    static = accel("launch", "--cpu", "--num_processes", "2", "--dry_run", str(script))
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in static.stdout


def test_config_default_update_show(accel, tmp_path):
    out = accel("config", "default", "--mixed_precision", "fp16")
    assert out.returncode == 0, out.stderr
    path = tmp_path / "accel-config" / "default_config.yaml"
    data = yaml.safe_load(path.read_text())
    assert data["mixed_precision"] == "fp16" and data["compute_environment"] == "LOCAL_MACHINE"
    assert accel("config", "default").returncode == 1  # exists: not overwritten
    old = tmp_path / "old.yaml"
    old.write_text("distributed_type: MULTI_CPU\nnum_processes: 2\ndynamo_backend: 'NO'\n")
    out = accel("config", "update", "--config_file", str(old))
    assert out.returncode == 0, out.stderr
    updated = yaml.safe_load(old.read_text())
    assert updated["dynamo_config"] == {"dynamo_backend": "NO"}
    assert updated["num_processes"] == 2 and updated["rdzv_backend"] == "static"
    assert "dynamo_backend" not in updated


def test_config_show_reports_every_source(accel, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("mixed_precision: fp16\nnum_processes: 4\ndebug: true\nuse_cpu: true\n")
    out = accel(
        "config", "show", "--config_file", str(cfg), "--num_processes", "2", "--json",
        env={"ACCEL_MIXED_PRECISION": "bf16"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    settings = json.loads(out.stdout)["settings"]
    assert settings["mixed_precision"] == {"value": "bf16", "source": "env ACCEL_MIXED_PRECISION"}
    assert settings["num_processes"] == {"value": 2, "source": "flag --num_processes"}
    assert settings["debug"] == {"value": True, "source": f"file {cfg}"}
    assert settings["rdzv_backend"] == {"value": "static", "source": "default"}
    assert settings["distributed_type"]["source"].startswith("derived")
    text = accel("config", "show", "--config_file", str(cfg), "--cpu").stdout
    assert "flag --cpu" in text and f"file {cfg}" in text


def test_config_questionnaire_from_answers(accel, tmp_path):
    answers = tmp_path / "answers.yaml"
    answers.write_text(
        "distributed_type: multi-CPU\nnum_machines: 2\nmachine_rank: 1\n"
        "main_process_ip: 10.1.2.3\nmain_process_port: 1234\nnum_processes: 4\n"
        "mixed_precision: bf16\nuse_dynamo: true\ndynamo_config.dynamo_backend: eager\n"
    )
    out_file = tmp_path / "out.yaml"
    out = accel("config", "--answers", str(answers), "--config_file", str(out_file))
    assert out.returncode == 0, out.stderr
    data = yaml.safe_load(out_file.read_text())
    assert data["distributed_type"] == "MULTI_CPU" and data["use_cpu"] is True
    assert (data["num_machines"], data["machine_rank"], data["num_processes"]) == (2, 1, 4)
    assert data["main_process_ip"] == "10.1.2.3" and data["main_process_port"] == 1234
    assert data["dynamo_config"]["dynamo_backend"] == "EAGER"
    out = accel("config", "--defaults")
    assert out.returncode == 0, out.stderr
    data = yaml.safe_load((tmp_path / "accel-config" / "default_config.yaml").read_text())
    assert data["distributed_type"] == "NO" and data["mixed_precision"] == "no"


@pytest.mark.parametrize("machine", ["multi-XPU", "multi-NPU", "multi-GPU", "MULTI_MLU"])
@pytest.mark.parametrize(
    ("use", "distributed_type", "section"),
    [
        ("use_fsdp", "FSDP", "fsdp_config"),
        ("use_deepspeed", "DEEPSPEED", "deepspeed_config"),
        ("use_megatron_lm", "MEGATRON_LM", "megatron_lm_config"),
    ],
)
def test_config_asks_the_strategy_questions_on_every_data_parallel_machine(
    accel, tmp_path, machine, use, distributed_type, section
):
    """FSDP, DeepSpeed and Megatron-LM run on any device kind of the catalog: `accel config`
    asks for them on multi-XPU and multi-NPU machines too (it once asked only on CPU/GPU)."""
    answers = tmp_path / "answers.yaml"
    answers.write_text(f"distributed_type: {machine}\n{use}: true\n")
    out_file = tmp_path / "out.yaml"
    plugins = "fsdp,deepspeed,megatron_lm"
    out = accel(
        "config", "--answers", str(answers), "--config_file", str(out_file), plugins=plugins
    )
    assert out.returncode == 0, out.stderr
    data = yaml.safe_load(out_file.read_text())
    assert data["distributed_type"] == distributed_type
    assert data[section]


def test_prompt_questions_go_through_prompt_toolkit():
    from accel_cli.questions import PromptAsk
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    with create_pipe_input() as inp:
        inp.send_text("\x1b[B\r")  # arrow down, enter
        assert PromptAsk(input=inp, output=DummyOutput()).select("?", ["a", "b"], "a") == "b"
    with create_pipe_input() as inp:
        inp.send_text("y")
        assert PromptAsk(input=inp, output=DummyOutput()).confirm("?", False) is True


def test_env_lists_versions_config_and_plugins(accel, tmp_path):
    (tmp_path / "accel-config").mkdir()
    (tmp_path / "accel-config" / "default_config.yaml").write_text(
        (DATA / "seed_multi_gpu.yaml").read_text()
    )
    out = accel("env")
    assert out.returncode == 0, out.stderr
    for label in (
        "`accel` version", "Platform", "Python version", "Numpy version",
        "PyTorch version (GPU?)", "System RAM", "`accel` default config", "Installed plugins",
    ):  # fmt: skip
        assert f"- {label}" in out.stdout, label
    assert "- compute_environment: LOCAL_MACHINE" in out.stdout
    assert "local_launchers (built in): accel-core" in out.stdout


def test_plugins_json(accel):
    out = accel("plugins", "--json")
    assert out.returncode == 0, out.stderr
    rows = {row["name"]: row for row in json.loads(out.stdout)}
    local = rows["local_launchers"]  # core's launchers, a default plugin: accel-cli is no plugin
    assert (local["distribution"], local["default"]) == ("accel-core", True)
    assert local["launchers"] == ["simple", "torchrun"]
    assert "accel_launchers" in local["hooks"]
    assert "cli" not in rows
    assert rows["single_process"]["default"] is True
    table = accel("plugins").stdout
    assert table.splitlines()[0].split() == [
        "plugin",
        "distribution",
        "version",
        "core_range",
        "hooks",
    ]


def test_single_process_accel_test_passes(accel):
    out = accel("test", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASS operations" in out.stdout and "accel test: PASSED" in out.stdout
