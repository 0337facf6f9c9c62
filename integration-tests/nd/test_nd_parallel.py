"""N-D parallelism (ParallelismConfig + accel-fsdp) on real gloo processes, against one unsplit process.

The 4-process tests are marked ``four_processes`` so CI can run them as a separate step
(``-m four_processes`` / ``-m "not four_processes"``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).parent / "workers" / "nd_checks.py"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCEL_", "PARALLELISM_"))}
    env.update(ACCEL_USE_CPU="1", OMP_NUM_THREADS="1")
    return env


def _run(command: list[str], timeout: float) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=_env())
    assert done.returncode == 0, (
        f"exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    )
    return done.stdout


def _torchrun(nproc: int, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "--max_restarts=0",
        str(WORKER),
        *args,
    ]


@pytest.mark.timeout(420)
def test_tensor_parallel_matches_the_unsplit_model():
    out = _run(_torchrun(2, "tp"), timeout=400)
    assert "ok parity {'tp_size': 2}" in out


@pytest.mark.four_processes
@pytest.mark.timeout(500)
def test_fsdp_times_tensor_parallel_matches_one_process():
    out = _run(_torchrun(4, "fsdp_tp"), timeout=480)
    assert "ok parity {'dp_shard_size': 2, 'tp_size': 2}" in out


@pytest.mark.four_processes
@pytest.mark.timeout(500)
def test_hsdp_matches_one_process():
    out = _run(_torchrun(4, "hsdp"), timeout=480)
    assert "ok parity {'dp_replicate_size': 2, 'dp_shard_size': 2}" in out


@pytest.mark.four_processes
@pytest.mark.timeout(900)
def test_checkpoint_reshards_across_layouts(tmp_path):
    """Saved at dp_shard=2 x tp=2, resumed at dp_shard=4, then on one process: same weights
    as training without interruption."""
    assert "ok save" in _run(_torchrun(4, "save", str(tmp_path)), timeout=400)
    assert "ok load4" in _run(_torchrun(4, "load4", str(tmp_path)), timeout=400)
    assert "ok load1" in _run([sys.executable, str(WORKER), "load1", str(tmp_path)], timeout=200)


def _launch(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "accel_cli", "launch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
        cwd=ROOT,
    )


@pytest.mark.timeout(200)
@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--parallelism_config_tp_size", "3"], "total_size (3 = "),
        (
            ["--parallelism_config_dp_replicate_size", "2", "--parallelism_config_tp_size", "2"],
            "set dp_shard_size > 1",
        ),
        (["--parallelism_config_tp_size", "0"], "--parallelism_config_tp_size"),
        (
            ["--use_deepspeed", "--parallelism_config_sp_size", "3"],
            "sp_size=3 must divide num_processes (4)",
        ),
    ],
)
def test_bad_sizes_exit_2_with_one_line(flags, needle, tmp_path):
    script = tmp_path / "never.py"
    script.write_text("raise SystemExit('the script must not run')\n")
    done = _launch("--cpu", "--num_processes", "4", *flags, str(script))
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.timeout(200)
def test_config_file_section_is_validated(tmp_path):
    config = tmp_path / "nd.yaml"
    config.write_text(
        "distributed_type: MULTI_CPU\nnum_processes: 4\nuse_cpu: true\n"
        "parallelism_config:\n  parallelism_config_dp_shard_size: 2\n"
        "  parallelism_config_tp_size: 2\n  parallelism_config_cp_size: 1\n"
        "  parallelism_config_tp_sise: 2\n"
    )
    script = tmp_path / "never.py"
    script.write_text("raise SystemExit(1)\n")
    done = _launch("--config_file", str(config), str(script))
    assert done.returncode == 2 and "parallelism_config_tp_sise" in done.stderr, done.stderr


@pytest.mark.four_processes
@pytest.mark.timeout(500)
def test_example_runs_through_accel_launch():
    done = _launch("--cpu", "--num_processes", "4", "docs/examples/nd_parallel.py", timeout=480)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-6000:])
    assert "nd_parallel: done" in done.stdout


@pytest.mark.timeout(300)
def test_context_parallel_mesh_loaders_and_buffer_sharding():
    """cp_size=2 on 2 processes: buffers split head-tail along the sequence, restored on exit."""
    assert "ok cp" in _run(_torchrun(2, "cp"), timeout=280)


@pytest.mark.timeout(200)
def test_accel_config_asks_for_the_layout_and_launch_checks_it(tmp_path):
    import yaml

    answers = tmp_path / "answers.yaml"
    answers.write_text(
        "distributed_type: multi-CPU\nnum_processes: 4\nuse_fsdp: true\n"
        "fsdp_config.fsdp_version: 2\nuse_parallelism_config: true\n"
        "parallelism_config.parallelism_config_dp_shard_size: 2\n"
        "parallelism_config.parallelism_config_tp_size: 2\n"
    )
    out_file = tmp_path / "nd.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "accel_cli", "config", "--answers", str(answers)]
        + ["--config_file", str(out_file)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load(out_file.read_text())
    assert data["parallelism_config"]["parallelism_config_tp_size"] == 2
    assert data["parallelism_config"]["parallelism_config_dp_shard_size"] == 2
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    done = _launch("--config_file", str(out_file), "--dry_run", str(script))
    assert done.returncode == 0, done.stderr
    assert "PARALLELISM_CONFIG_TP_SIZE=2" in done.stdout + done.stderr, done.stdout
    done = _launch("--config_file", str(out_file), "--num_processes", "8", str(script))
    assert done.returncode == 2 and "num_processes (8)" in done.stderr, done.stderr
