"""Elastic training inside a Ray ``TorchTrainer``: ``ScalingConfig(num_workers=(1, 2))``.

One Ray run on the session's loopback cluster with a second node (each worker needs one
``accel_test_node``, which every node has once): 2 workers train; one step past a reported
checkpoint the node of one worker is removed (a lost machine, its worker dies with it), Ray
restarts the group on 1 worker from its latest checkpoint; then the node comes back and Ray
grows the group to 2 again. Every sample of the epoch is seen exactly once across both
resizes and the final weights are an uninterrupted run's (same global batch, up to the order
of floating-point reductions).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from accel.testing.processes import clean_environment

WORKER = Path(__file__).parent / "workers" / "elastic_train.py"
_spec = importlib.util.spec_from_file_location("elastic_train", WORKER)
elastic_train = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(elastic_train)
QUICK_GIVE_UP = {"RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "3"}


def wait_for(path: Path, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"the run ended before {path.name} appeared")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} did not appear in {timeout:.0f} s")
        time.sleep(0.2)


@pytest.mark.timeout(600)
def test_group_shrinks_and_grows_back_on_node_loss(ray_cluster, quick_train, tmp_path):
    from accel_ray.testing import ENVIRONMENT, NODE_RESOURCE

    # the uninterrupted run, once per session (test_launch_ray_elastic.py compares with it too)
    reference_dir = Path(ray_cluster.temp_dir) / "elastic-reference"
    reference = elastic_train.start_reference(reference_dir)
    if ray_cluster.nodes < 2:
        ray_cluster.add_node(num_cpus=1, resources={NODE_RESOURCE: 1})
    out = tmp_path / "ray"
    out.mkdir()
    # Ray's view of the cluster can lag the lost node by a second or two (the restart races
    # the node's death): a first try for 2 workers then waits for a placement that cannot
    # come; give up on it after 3 s instead of 60 s (placing a group that fits takes
    # milliseconds: no worker starts before it is placed)
    env = clean_environment(
        {**ENVIRONMENT, "RAY_ADDRESS": ray_cluster.address, **QUICK_GIVE_UP, **quick_train},
    )
    started = time.monotonic()
    log = tmp_path / "driver.log"
    with open(log, "w", encoding="utf-8") as sink:
        driver = subprocess.Popen(
            [sys.executable, str(WORKER), "ray", str(out), ray_cluster.address, "grow"],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        wait_for(out / "paused-2", driver, 300)
        print(f"paused on 2 after {time.monotonic() - started:.0f} s")
        ray_cluster.remove_node()
        wait_for(out / "paused-1", driver, 300)
        print(f"paused on 1 after {time.monotonic() - started:.0f} s")
        ray_cluster.add_node(num_cpus=1, resources={NODE_RESOURCE: 1})
        driver.wait(timeout=300)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    print(f"done after {time.monotonic() - started:.0f} s")
    output = log.read_text()
    assert driver.returncode == 0, output[-8000:]

    expected = elastic_train.reference_weights(reference, reference_dir)
    seen, sizes = elastic_train.contributions(out)
    assert sizes == [2, 1, 2], sizes
    assert sorted(seen) == list(range(96))  # every sample of the epoch exactly once
    final = json.loads((out / "final.json").read_text())
    assert final["updates"] == 12, final
    ours = torch.load(out / "final.pt")
    assert ours.keys() == expected.keys()
    for name in ours:
        torch.testing.assert_close(ours[name], expected[name], atol=1e-5, rtol=0)
    assert "checkpoint written by 2 processes, resumed on 1" in output, output[-8000:]
    assert "checkpoint written by 1 processes, resumed on 2" in output, output[-8000:]
