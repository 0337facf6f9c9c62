"""`accel launch --ray` on a loopback-only Ray cluster (one node, then two), against `accel launch`.

Each run pays Ray's start-up of a controller and two workers (most of a minute on 2
cores), so there are two Ray runs only: one on two nodes that trains like a local launch and
then fails like one, and one stopped by Ctrl-C. Without accel-ray, `--ray` is a one-line
error naming the package.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time

import pytest
import torch
from accel.testing.processes import finish_processes

from .conftest import RAY_TRAIN, WORKERS, finish, launch_env, start


def _ray_flags(cluster, tmp_path, *extra: str) -> list[str]:
    return [
        "--ray",
        "--ray_address",
        cluster.address,
        "--ray_storage_path",
        str(tmp_path / "ray-storage"),
        "--ray_name",
        "run",
        *extra,
    ]


def _summary(err: str) -> list[str]:
    """The lines of accel launch's failure report: who failed first, the traceback's end."""
    lines = err.splitlines()
    first = next(i for i, line in enumerate(lines) if "failed first" in line)
    return lines[first : first + 2] + [
        line for line in lines[first + 2 :] if line.startswith("    ")
    ]


@pytest.mark.timeout(600)
def test_ray_workers_on_two_nodes_train_and_fail_like_a_local_launch(ray_cluster, tmp_path):
    """Same weights as `accel launch --num_processes 2`, then rank 1 raises: same exit status
    and the same report of the failing rank. The two workers run on two Ray nodes."""
    from accel_ray.testing import NODE_RESOURCE

    if ray_cluster.nodes < 2:
        ray_cluster.add_node(num_cpus=2, resources={NODE_RESOURCE: 1})
    script = [str(RAY_TRAIN), "script"]
    # the local launch runs while Ray starts its workers
    local = start(
        ["launch", "--cpu", "--num_processes", "2", *script, str(tmp_path / "local"), "fail"],
        launch_env(tmp_path),
        tmp_path,
    )
    flags = _ray_flags(
        ray_cluster,
        tmp_path,
        "--ray_resources_per_worker",
        f"CPU=1,{NODE_RESOURCE}=1",
        "--ray_num_to_keep",
        "3",
    )
    argv = [
        "launch",
        "--cpu",
        "--num_processes",
        "2",
        *flags,
        *script,
        str(tmp_path / "ray"),
        "fail",
    ]
    ray_run = start(argv, launch_env(tmp_path, ray_cluster), tmp_path)
    # the Ray run's pipes first: its logs would fill them (the local launch says little)
    (code, out, err), (local_code, local_out, local_err) = finish_processes(
        [ray_run, local], timeout=500
    )
    assert local_code == 1, local_out + local_err[-4000:]
    assert code == local_code, out[-3000:] + err[-5000:]
    assert "launcher ray" in err and "2 Ray Train workers" in err

    ours, theirs = (
        torch.load(tmp_path / "ray" / "final.pt"),
        torch.load(tmp_path / "local" / "final.pt"),
    )
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    notes = [json.loads(p.read_text()) for p in (tmp_path / "ray").glob("note-*.json")]
    assert sorted(n["rank"] for n in notes) == [0, 1]
    assert all(n["group_before_accelerator"] and n["master_addr"] == "127.0.0.1" for n in notes)
    assert len({n["ray_node"] for n in notes}) == 2, notes  # one worker on each node
    # every save_state (8) was reported to Ray by itself (ray_report_checkpoints); Ray kept
    # the newest 3 (ray_num_to_keep)
    storage = tmp_path / "ray-storage" / "run"
    reported = sorted(p.name for p in storage.glob("checkpoint_*") if p.is_dir())
    assert reported == [f"checkpoint_{i}" for i in range(5, 8)], reported

    # Ray Train numbers nodes by IP address and both nodes are 127.0.0.1 here, so the
    # worker on the second node is "local rank 1, machine 0", as under torchrun
    assert _summary(err) == _summary(local_err), err[-4000:]
    assert _summary(err)[0] == (
        "accel launch: worker rank 1 (local rank 1, machine 0) failed first: "
        "ValueError: rank 1 fails after training"
    ), err[-3000:]
    assert any('raise ValueError("rank 1 fails after training")' in line for line in _summary(err))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.timeout(600)
def test_ctrl_c_stops_the_ray_run_and_its_workers(ray_cluster, tmp_path):
    argv = ["launch", "--cpu", "--num_processes", "2", *_ray_flags(ray_cluster, tmp_path)]
    process = start(
        [*argv, str(WORKERS / "sleeper.py"), str(tmp_path)],
        launch_env(tmp_path, ray_cluster),
        tmp_path,
    )
    pid_files = [tmp_path / f"pid-rank{r}" for r in (0, 1)]
    deadline = time.monotonic() + 400
    while not all(p.exists() for p in pid_files):
        if process.poll() is not None or time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            pytest.fail(f"the workers did not start:\n{out[-2000:]}\n{err[-4000:]}")
        time.sleep(0.2)
    pids = [int(p.read_text()) for p in pid_files]
    process.send_signal(signal.SIGINT)  # what Ctrl-C in a terminal sends accel launch
    code, out, err = finish(process, timeout=120)
    assert code == 130, out[-2000:] + err[-4000:]
    assert "stopped by SIGINT" in err, err[-3000:]
    deadline = time.monotonic() + 60
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not any(_alive(pid) for pid in pids), f"Ray Train workers left running: {pids}"

    # nor the run's controller, nor Ray Train's placement-group cleaner (cluster-wide
    # services such as Ray's autoscaling coordinator stay)
    def run_actors() -> dict[int, str]:
        names = ("TrainController", "RayTrainWorker", "PlacementGroupCleaner")
        return {p: t for p, t in ray_cluster.ray_processes().items() if any(n in t for n in names)}

    deadline = time.monotonic() + 30
    while run_actors() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not run_actors(), run_actors()


def test_ray_train_v1_is_a_usage_error(tmp_path):
    """Failing ranks are read from Ray Train V2's errors: V1 stops before Ray starts."""
    (tmp_path / "x.py").write_text("print('never runs')\n")
    env = launch_env(tmp_path, RAY_TRAIN_V2_ENABLED="0")
    code, out, err = finish(start(["launch", "--ray", "x.py"], env, tmp_path), timeout=60)
    assert code == 2, out + err
    assert err.splitlines()[-1].startswith("accel launch: error: --ray needs Ray Train V2"), err
    assert "Traceback" not in err


def test_ray_flags_without_accel_ray_name_the_package(tmp_path):
    (tmp_path / "x.py").write_text("print('never runs')\n")
    for flag in (["--ray"], ["--ray_address", "127.0.0.1:1"]):
        env = launch_env(tmp_path, ACCEL_DISABLE_PLUGINS="ray")
        code, out, err = finish(start(["launch", *flag, "x.py"], env, tmp_path), timeout=60)
        assert code == 2, out + err
        assert len(err.strip().splitlines()) == 1, err
        assert f"{flag[0]} needs the accel-ray package: pip install accel-ray" in err, err


def test_accel_config_question_writes_a_ray_launch(tmp_path):
    import yaml

    head = socket.create_server(("127.0.0.1", 0))  # answers the launch's reachability probe
    address = f"ray://127.0.0.1:{head.getsockname()[1]}"
    answers = {
        "distributed_type": "multi-CPU",
        "ray_config.use_ray": True,
        "ray_config.ray_address": address,
        "ray_config.ray_max_failures": 2,
    }
    (tmp_path / "answers.yaml").write_text(yaml.safe_dump(answers))
    (tmp_path / "train.py").write_text("print('never runs')\n")
    env = launch_env(tmp_path)
    configure = ["config", "--answers", "answers.yaml", "--config_file", "c.yaml"]
    code, out, err = finish(start(configure, env, tmp_path), timeout=60)
    assert code == 0, out + err
    config = yaml.safe_load((tmp_path / "c.yaml").read_text())
    assert config["ray_config"] == {
        "use_ray": True,
        "ray_address": address,
        "ray_max_failures": 2,
    }, config
    dry_run = ["launch", "--dry_run", "--config_file", "c.yaml", "train.py"]
    with head:
        code, out, err = finish(start(dry_run, env, tmp_path), timeout=60)
    assert code == 0, out + err
    assert out.splitlines()[:2] == [
        "launcher: ray",
        f"command: {sys.executable} -m accel_ray.driver --script train.py",
    ], out
