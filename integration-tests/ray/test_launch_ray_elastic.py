"""`accel launch --ray --ray_num_workers 1:2`: elastic training through the launcher.

One Ray run on the session's loopback cluster with two nodes (one worker per node): the
script saves (and reports) every optimizer step; one step past a checkpoint the node of one
worker is removed, Ray restarts the group on 1 worker from the latest checkpoint and the run
ends with exit 0. Every sample of the epoch is seen exactly once across the resize, the
final weights are an uninterrupted torchrun run's, and the resumed worker says what happened.
A bad range is a one-line error (exit 2) before anything starts.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from .conftest import ACCEL, RAY_TRAIN, finish, launch_env, start

ELASTIC = RAY_TRAIN.with_name("elastic_train.py")
"""accel-ray's elastic training worker (plain script mode here)."""
_spec = importlib.util.spec_from_file_location("elastic_train", ELASTIC)
elastic_train = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(elastic_train)


def _wait_for(path: Path, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{path.name} did not appear (exit status {process.poll()})")
        time.sleep(0.2)


@pytest.mark.timeout(600)
def test_ray_num_workers_range_shrinks_on_node_loss(ray_cluster, tmp_path):
    from accel_ray.testing import NODE_RESOURCE

    # the uninterrupted run, once per session (accel-ray's test_elastic.py compares with it too)
    reference_dir = Path(ray_cluster.temp_dir) / "elastic-reference"
    reference = elastic_train.start_reference(reference_dir)
    if ray_cluster.nodes < 2:
        ray_cluster.add_node(num_cpus=1, resources={NODE_RESOURCE: 1})
    out = tmp_path / "ray"
    argv = [
        str(ACCEL),
        "launch",
        "--cpu",
        "--ray",
        "--ray_address",
        ray_cluster.address,
        "--ray_storage_path",
        str(tmp_path / "ray-storage"),
        "--ray_name",
        "elastic",
        "--ray_num_workers",
        "1:2",
        "--ray_max_failures",
        "2",
        "--ray_resources_per_worker",
        f"CPU=1,{NODE_RESOURCE}=1",
        str(ELASTIC),
        "script",
        str(out),
        "pause",
    ]
    # Ray's view of the cluster can lag the lost node by a second or two (the restart races
    # the node's death): a first try for 2 workers then waits for a placement that cannot
    # come; give up on it after 3 s instead of 60 s (placing a group that fits takes
    # milliseconds: no worker starts before it is placed)
    env = launch_env(tmp_path, ray_cluster, RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S="3")
    log = tmp_path / "launch.log"
    with open(log, "w", encoding="utf-8") as sink:  # a file: Ray's logs never fill a pipe
        process = subprocess.Popen(
            argv,
            env=env,
            cwd=tmp_path,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_for(out / "paused-2", process, 400)
        ray_cluster.remove_node()
        process.wait(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    output = log.read_text()
    assert process.returncode == 0, output[-8000:]
    assert "launcher ray" in output and "1 to 2 Ray Train workers (elastic)" in output

    seen, sizes = elastic_train.contributions(out)
    assert sizes == [2, 1], sizes
    assert sorted(seen) == list(range(96))  # every sample of the epoch exactly once
    assert (
        "checkpoint written by 2 processes, resumed on 1: data position epoch 0, sample " in output
    ), output[-8000:]
    assert "gradient accumulation steps now 2" in output
    theirs = elastic_train.reference_weights(reference, reference_dir)
    ours = torch.load(out / "final.pt")
    assert ours.keys() == theirs.keys()
    for name in ours:
        torch.testing.assert_close(ours[name], theirs[name], atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2:1", "MIN 2 is larger than MAX 1"),
        ("1:x", "give a number of workers N or an elastic range MIN:MAX (e.g. 1:4)"),
    ],
)
def test_a_bad_range_is_one_line_and_exit_2(tmp_path, value, message):
    (tmp_path / "x.py").write_text("print('never runs')\n")
    argv = ["launch", "--ray", "--ray_num_workers", value, "x.py"]
    code, out, err = finish(start(argv, launch_env(tmp_path), tmp_path), timeout=60)
    assert code == 2, out + err
    assert err.strip().splitlines() == [
        f"accel launch: error: argument --ray_num_workers: {value!r}: {message} "
        "(see `accel launch --help`)"
    ], err
