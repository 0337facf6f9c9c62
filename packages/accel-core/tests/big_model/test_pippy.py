"""prepare_pippy on two CPU processes (gloo) gives the unsplit model's output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from accel.inference import _split_points_from_map, generate_device_map

WORKER = Path(__file__).parent / "scripts" / "pippy_worker.py"


def test_prepare_pippy_two_processes_matches_unsplit_model(subprocess_env):
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "--max_restarts=0",
        str(WORKER),
    ]
    env = {**subprocess_env, "ACCEL_USE_CPU": "1"}
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=480, env=env)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the pipeline workers did not finish in {exc.timeout} s")
    assert result.returncode == 0, (
        f"--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-6000:]}"
    )
    assert result.stdout.count("pippy ok") == 2, result.stdout


def test_automatic_split_points_are_balanced(empty_model):
    model = empty_model(depth=6)
    device_map = generate_device_map(model, num_processes=3, no_split_module_classes=["Block"])
    points = _split_points_from_map(model, device_map)
    assert len(points) == 2 and all(p.startswith("blocks.") for p in points), device_map
    assert os.environ.get("WORLD_SIZE") is None  # planning needs no process group


def test_split_between_processes_pads_prompts():
    """The seed's per-process prompts: 3 prompts on 2 processes, padded to equal shares."""
    from accel import PartialState

    shares = []
    for rank in (0, 1):
        state = PartialState.__new__(PartialState)  # a process of a 2-process run, without one
        state.__dict__ = {"process_index": rank, "num_processes": 2}
        prompts = ["a dog", "a cat", "a chicken"]
        with PartialState.split_between_processes(state, prompts, apply_padding=True) as share:
            shares.append(share)
    assert shares == [["a dog", "a cat"], ["a chicken", "a chicken"]]
