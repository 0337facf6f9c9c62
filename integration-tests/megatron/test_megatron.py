"""accel-megatron: real 2-process megatron-core runs (one through `accel launch`), config and CLI checks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
WORKER = HERE / "workers" / "megatron_checks.py"
SEED_YAML = HERE.parents[1] / "packages" / "accel-cli" / "tests" / "data" / "seed_megatron.yaml"
ACCEL = Path(sys.executable).with_name("accel")

TP_CONFIG = """\
compute_environment: LOCAL_MACHINE
deepspeed_config: {}
distributed_type: MEGATRON_LM
downcast_bf16: 'no'
dynamo_backend: 'NO'
fsdp_config: {}
machine_rank: 0
main_training_function: main
megatron_lm_config:
  megatron_lm_gradient_clipping: 0.5
  megatron_lm_num_micro_batches: 2
  megatron_lm_pp_degree: 1
  megatron_lm_recompute_activations: true
  megatron_lm_sequence_parallelism: false
  megatron_lm_tp_degree: 2
  megatron_lm_use_distributed_optimizer: false
mixed_precision: 'no'
num_machines: 1
num_processes: 2
rdzv_backend: static
same_network: true
use_cpu: true
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ACCEL_", "PET_", "TORCHELASTIC_"))
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(ACCEL_CONFIG_DIR=str(tmp_path / "cfg"), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


def _accel(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    process = subprocess.Popen(
        [str(ACCEL), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
        cwd=str(tmp_path),
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"accel {' '.join(args)} timed out\n{stdout[-4000:]}\n{stderr[-6000:]}")
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


@pytest.mark.timeout(400)
def test_tensor_parallel_run_through_accel_launch(tmp_path):
    """TP=2 from a seed-style YAML: MLP parity, GPT training, scheduler, eval loss, save/load."""
    config = tmp_path / "megatron.yaml"
    config.write_text(TP_CONFIG)
    done = _accel(
        tmp_path, "launch", "--config_file", str(config), str(WORKER), "tp", str(tmp_path),
        timeout=380,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-8000:]
    for check in (
        "launched_plugin",
        "groups (2, 1, 1)",
        "mlp_forward_backward",
        "mlp_clipped_step",
        "global_batch_size 4",
        "gpt_train ",
        "save_load",
        "megatron_datasets",
        "all tp",
    ):
        assert _passed(done.stdout, check) == 2, (check, done.stdout)


@pytest.mark.timeout(400)
def test_data_parallel_then_pipeline_run(run_distributed, tmp_path):
    """tp=1 on 2 processes (data sharded over the DP group, gradients and eval losses averaged
    over it), then pp=2 in the same processes (pipelined GPT equal to the unsplit one, trains),
    then tp=2 (GPT loss and SGD step equal to the unsplit one's), then tp=2 with sequence
    parallelism (MLP equal to the unsplit one)."""
    out = run_distributed("megatron_checks.py", "dp", str(tmp_path), timeout=380).stdout
    for check in (
        "groups (1, 1, 2)",
        "mlp_forward_backward",
        "mlp_clipped_step",
        "global_batch_size 8",
        "gpt_train ",
        "save_load",
        "megatron_datasets",
        "pipeline_equals_unsplit",
        "pipeline_train ",
        "gpt_tensor_parallel_equals_unsplit",
        "mlp_forward_backward sequence_parallel",
        "mlp_clipped_step sequence_parallel",
        "all dp",
    ):
        assert _passed(out, check) == 2, (check, out)


def _passed(out: str, check: str) -> int:
    """How many ranks reported ``ok <check>`` (a check ending in a space takes a value after it)."""
    lines = out.splitlines()
    if check.endswith(" "):
        return sum(line.startswith(f"ok {check}") for line in lines)
    return sum(line == f"ok {check}" for line in lines)


def _launched(tmp_path: Path, *args: str) -> dict:
    (tmp_path / "train.py").write_text("")
    done = _accel(tmp_path, "launch", *args, "--dry_run", "train.py")
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("env: ACCEL_LAUNCH_CONFIG="))
    return json.loads(line.split("=", 1)[1])


SEED_SETTINGS = {
    "tp_degree": 2,
    "pp_degree": 2,
    "num_micro_batches": 2,
    "sequence_parallelism": True,
    "recompute_activations": True,
    "use_distributed_optimizer": True,
    "gradient_clipping": 1.0,
}


def _plugin_from(monkeypatch, launched: dict):
    from accel_megatron import MegatronLMPlugin

    assert launched["distributed_type"] == "MEGATRON_LM"
    monkeypatch.setenv("ACCEL_LAUNCH_CONFIG", json.dumps(launched))
    plugin = MegatronLMPlugin()
    assert {k: getattr(plugin, k) for k in SEED_SETTINGS} == SEED_SETTINGS
    assert plugin.dp_degree(launched["num_processes"]) == 2
    return plugin


def test_seed_yaml_gives_plugin_settings(tmp_path, monkeypatch):
    _plugin_from(monkeypatch, _launched(tmp_path, "--config_file", str(SEED_YAML)))


def test_seed_flags_give_plugin_settings(tmp_path, monkeypatch):
    launched = _launched(
        tmp_path,
        "--use_megatron_lm", "--num_processes=8", "--mixed_precision=bf16",
        "--megatron_lm_tp_degree=2", "--megatron_lm_pp_degree=2",
        "--megatron_lm_num_micro_batches=2", "--megatron_lm_sequence_parallelism=true",
        "--megatron_lm_recompute_activations=true",
        "--megatron_lm_use_distributed_optimizer=true",
    )  # fmt: skip
    assert launched["mixed_precision"] == "bf16"
    _plugin_from(monkeypatch, launched)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--megatron_lm_tp_degree=abc"], "--megatron_lm_tp_degree: 'abc' is not an integer"),
        (["--megatron_lm_pp_degree=2"], "needs num_micro_batches > 1"),
        (["--megatron_lm_sequence_parallelism=true"], "needs tp_degree > 1"),
        (["--megatron_lm_recompute_activations=maybe"], "is not a boolean"),
    ],
)
def test_bad_launch_flags_exit_2_with_one_line(tmp_path, flags, message):
    (tmp_path / "train.py").write_text("")
    done = _accel(
        tmp_path,
        "launch",
        "--use_megatron_lm",
        "--num_processes=2",
        *flags,
        "--dry_run",
        "train.py",
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
