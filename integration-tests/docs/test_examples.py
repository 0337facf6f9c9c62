"""Run every script of docs/examples/ as a reader would: python, or ``accel launch`` on 2 CPU processes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = REPO / "docs" / "examples"
ACCEL = str(Path(sys.executable).with_name("accel"))
LAUNCH_2 = [ACCEL, "launch", "--cpu", "--num_processes", "2"]

EXAMPLES: dict[str, tuple[list[str], str]] = {
    # file: (command before the script, a line its output must contain)
    "train_demo.py": ([sys.executable], "accuracy"),
    "accumulation.py": ([sys.executable], "max difference"),
    "bf16.py": ([sys.executable], "inside the model: torch.bfloat16"),
    "checkpoint_resume.py": ([sys.executable], "identical to the uninterrupted run: True"),
    "tracker_tensorboard.py": ([sys.executable], "20 scalars"),
    "profiler.py": ([sys.executable], "Self CPU time total"),  # the table's top rows vary with load
    "big_model_offload.py": ([sys.executable], "same outputs as the original: True"),
    "distributed_inference.py": (LAUNCH_2, "'1: A COW'"),
    "fsdp_train.py": (LAUNCH_2, "epoch 2: loss"),
    "deepspeed_zero2.py": (LAUNCH_2, "epoch 2: loss"),
    "launched.py": (
        [ACCEL, "launch", "--config_file", str(EXAMPLES_DIR / "configs" / "multi_cpu.yaml")],
        "sum over processes: 3.0",
    ),
}
# Scripts run by another test (with more processes than the docs tests use).
TESTED_ELSEWHERE = {
    "nd_parallel.py": "integration-tests/nd/test_nd_parallel.py",
    "elastic_resize.py": "integration-tests/docs/test_elastic_page.py",  # on 2, then on 1
}
ARGS = {"train_demo.py": ["--epochs", "3", "--threshold", "0.8", "--output_dir", "{tmp}/demo"]}
NO_COMPILER = (
    "DeepSpeed JIT-builds its CPU ops (shm_comm, cpu_adam) with a C++ compiler: "
    "apt-get install g++ (see .ci/setup.d/deepspeed.sh)"
)
TIMEOUT = {"deepspeed_zero2.py": 480, "train_demo.py": 240}


def test_every_example_is_listed():
    scripts = {p.name for p in EXAMPLES_DIR.glob("*.py")}
    assert scripts == set(EXAMPLES) | set(TESTED_ELSEWHERE), scripts ^ set(EXAMPLES)
    for script, test in TESTED_ELSEWHERE.items():
        assert f"docs/examples/{script}" in (REPO / test).read_text(encoding="utf-8"), test


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_runs(name, tmp_path):
    prefix, expected = EXAMPLES[name]
    if name == "tracker_tensorboard.py":
        pytest.importorskip("tensorboard", reason="needs accel-trackers[tensorboard]")
    if name == "deepspeed_zero2.py":
        pytest.importorskip("deepspeed", reason="needs accel-deepspeed")
        if shutil.which(os.environ.get("CXX", "c++")) is None:
            pytest.skip(NO_COMPILER)
    args = [a.format(tmp=tmp_path) for a in ARGS.get(name, [])]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env.update(
        OMP_NUM_THREADS="1",
        HOME=str(tmp_path),  # no user config file is picked up
        DS_ACCELERATOR="cpu",
        TORCH_EXTENSIONS_DIR=os.environ.get(
            "TORCH_EXTENSIONS_DIR", str(REPO / ".cache" / "torch_extensions")
        ),
    )
    timeout = TIMEOUT.get(name, 180)
    process = subprocess.Popen(
        [*prefix, str(EXAMPLES_DIR / name), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
        env=env,
        start_new_session=True,  # a timeout ends the workers too
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"{name} timed out after {timeout} s\n{output[-6000:]}")
    assert process.returncode == 0, output[-6000:]
    assert expected in output, output[-6000:]
