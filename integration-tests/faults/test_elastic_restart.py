"""Elastic restarts on real processes: a worker SIGKILLed *after* the gloo process group exists
is restarted by `accel launch --max_restarts 1`, and the new workers form a new group (the
per-attempt store prefix of accel.state) and finish. Also: elastic membership (MIN:MAX nodes)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ELASTIC = Path(__file__).parent / "workers" / "elastic.py"
TRIALS = 3
LANES = 2
# with MIN nodes present a round still waits last_call_timeout (30 s unless set) for MAX
LONE_NODE = "last_call_timeout=1"
pytestmark = pytest.mark.timeout(900)


def test_a_worker_killed_after_the_group_exists_is_restarted_and_finishes(launch, tmp_path):
    rng = random.Random(23)
    trials = [(rng.randrange(2), round(rng.uniform(0.0, 1.0), 2)) for _ in range(TRIALS)]

    def run(trial: int, victim: int, delay: float):
        out = tmp_path / f"trial{trial}"
        out.mkdir()
        return launch(
            "--cpu", "--num_processes", "2", "--max_restarts", "1", "--monitor_interval", "0.2",
            ELASTIC, out, victim, delay, plugins="",
        ).wait(timeout=240)  # fmt: skip

    # two trials at a time: one's single-process phases leave a core free for the other
    with ThreadPoolExecutor(max_workers=LANES) as pool:
        futures = [pool.submit(run, trial, *plan) for trial, plan in enumerate(trials)]
        results = [future.result() for future in futures]
    for trial, ((victim, delay), result) in enumerate(zip(trials, results)):
        out = tmp_path / f"trial{trial}"
        context = f"trial {trial} (victim {victim}, delay {delay})\n{result.stderr[-4000:]}"
        assert result.returncode == 0, context
        assert len(list(out.glob("ready-rank*-restart0"))) == 2, context  # the group had formed
        assert not list(out.glob("done-rank*-restart0.json")), context  # ... and attempt 0 died
        done = [json.loads(p.read_text()) for p in sorted(out.glob("done-rank*-restart1.json"))]
        assert [d["rank"] for d in done] == [0, 1], context
        assert all(d["sum"] == 3.0 and d["ranks"] == [0, 1] for d in done), context


def test_elastic_membership_through_torchrun_still_forms_the_group(faults, tmp_path):
    """`torchrun --nnodes 1:2` (c10d rendezvous, membership may change) with accel's process group."""
    out = tmp_path / "out"
    out.mkdir()
    port = faults.free_port()
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "1:2", "--nproc_per_node", "2",
        "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--max_restarts", "1",
        "--monitor_interval", "0.2", "--rdzv_conf", LONE_NODE, "--module", "accel.launchers.worker",
        "--script", str(ELASTIC),
        str(out), "-1", "0",
    ]  # fmt: skip
    env = faults.launch_env(tmp_path, plugins="", ACCEL_USE_CPU="1")
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-4000:]
    done = [json.loads(p.read_text()) for p in sorted(out.glob("done-rank*-restart0.json"))]
    assert [d["sum"] for d in done] == [3.0, 3.0]


def test_accel_launch_accepts_nnodes_min_max(launch, tmp_path, faults):
    """`accel launch --nnodes 1:2`: elastic membership through a c10d rendezvous (chosen for it)."""
    out = tmp_path / "out"
    out.mkdir()
    result = launch(
        "--cpu", "--nnodes", "1:2", "--nproc_per_node", "2",
        "--main_process_port", str(faults.free_port()), "--rdzv_conf", LONE_NODE,
        ELASTIC, out, "-1", "0", plugins="",
    ).wait(timeout=240)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    done = [json.loads(p.read_text()) for p in sorted(out.glob("done-rank*-restart0.json"))]
    assert [d["sum"] for d in done] == [3.0, 3.0]


def test_nnodes_min_max_is_checked(tmp_path, faults):
    from accel_cli.launch import plan

    script = tmp_path / "x.py"
    script.write_text("")
    planned = plan(["--cpu", "--nnodes", "1:3", "--nproc_per_node", "2", str(script)])
    argv = planned["argv"] if "argv" in planned else planned["plan"].argv
    assert argv[argv.index("--nnodes") + 1] == "1:3"
    assert argv[argv.index("--rdzv_backend") + 1] == "c10d"
    env = faults.launch_env(tmp_path, plugins="")
    bad = subprocess.run(
        [str(Path(sys.executable).with_name("accel")), "launch", "--nnodes", "3:1", str(script)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "MIN:MAX" in bad.stderr
