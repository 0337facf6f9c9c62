"""`accel launch` on real processes (gloo on CPU): 2 ranks, multi-node on loopback, failures,
restarts after SIGKILL, and SIGTERM reaching every worker. Each torchrun start costs ~10 s here,
so each test is one launch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

RANKS = str(Path(__file__).parent / "scripts" / "ranks.py")


def _records(out, restart=0):
    return {
        r["rank"]: r
        for r in (json.loads(p.read_text()) for p in out.glob(f"rank*-restart{restart}.json"))
    }


def test_failing_worker_rank_and_traceback_are_shown(run_accel, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    result = run_accel(
        "launch", "--cpu", "--num_processes", "2", RANKS, str(out), "--fail-rank", "1"
    )
    assert result.returncode == 1, result.stdout + result.stderr
    err = result.stderr
    assert (
        "accel launch: worker rank 1 (local rank 1, machine 0) failed first: ValueError: boom on rank 1"
        in err
    )
    assert "Traceback (most recent call last)" in err
    assert 'ranks.py", line' in err and "raise ValueError" in err
    # torch's own report is left out (it comes back with --debug: tests of accel_cli.agent
    # in packages/accel-cli); the summary repeats the end of rank 1's traceback instead
    assert "ChildFailedError" not in err, err
    assert "torch.distributed.elastic.multiprocessing.errors" not in err, err
    assert "error_handler.py" not in err, err
    summary = err[err.index("accel launch: worker rank 1") :]
    assert "the end of rank 1's traceback:" in summary and "raise ValueError" in summary, err
    assert "ValueError: boom on rank 1" in summary.splitlines()[-1], err


def test_worker_killed_with_sigkill_is_restarted(run_accel, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    result = run_accel(
        "launch", "--cpu", "--num_processes", "2", "--max_restarts", "1", "--monitor_interval", "0.2",
        RANKS, str(out), "--kill-rank-once", "1",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert (out / "pid-rank1-restart0").exists()  # the first attempt of rank 1 did start
    assert not (out / "rank1-restart0.json").exists()  # ... and was killed
    records = _records(out, restart=1)
    assert sorted(records) == [0, 1] and all(r["sum"] == 3.0 for r in records.values())


def test_two_machines_on_loopback_form_one_job(cli, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    port = str(cli.free_port())
    procs = []
    for machine in (0, 1):
        cmd = [
            str(cli.ACCEL), "launch", "--cpu", "--num_machines", "2", "--machine_rank", str(machine),
            "--main_process_ip", "127.0.0.1", "--main_process_port", port, "--num_processes", "2",
            RANKS, str(out),
        ]  # fmt: skip
        procs.append(
            subprocess.Popen(
                cmd,
                env=cli.accel_env(tmp_path),
                cwd=str(tmp_path),
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )  # fmt: skip
        )
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=300))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for proc, (stdout, stderr) in zip(procs, outputs):
        assert proc.returncode == 0, stdout + stderr
    assert "2 machines x 1 process (this is machine 1)" in outputs[1][1]
    records = _records(out)
    assert sorted(records) == [0, 1]
    assert {r["group_rank"]: r["rank"] for r in records.values()} == {0: 0, 1: 1}
    assert all(
        r["world"] == 2 and r["local_rank"] == 0 and r["sum"] == 3.0 for r in records.values()
    )


def _check_settings(records: dict) -> None:
    assert sorted(records) == [0, 1]
    for rank, rec in records.items():
        assert rec["world"] == 2 and rec["local_rank"] == rank
        assert rec["sum"] == 3.0 and rec["ranks"] == [0, 1]
        assert rec["backend"] == "gloo" and rec["device"] == "cpu"
        env = rec["env"]
        assert env["ACCEL_USE_CPU"] == "true"
        assert env["ACCEL_DISTRIBUTED_TYPE"] == "MULTI_CPU"
        assert env["ACCEL_MIXED_PRECISION"] == "bf16"
        assert env["ACCEL_DEBUG_MODE"] == "true"
        assert env["ACCEL_GRADIENT_ACCUMULATION_STEPS"] == "2"
        assert rec["config"]["num_processes"] == 2 and rec["config"]["mixed_precision"] == "bf16"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_two_cpu_processes_then_stopping_the_launcher_leaves_nothing(cli, tmp_path, sig):
    """`--cpu --num_processes 2` starts 2 gloo ranks with the settings as ACCEL_* variables;
    SIGTERM is forwarded and every worker stops; even a SIGKILLed launcher leaves nothing."""
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen(
        [
            str(cli.ACCEL), "launch", "--cpu", "--num_processes", "2", "--mixed_precision", "bf16",
            "--debug", "--gradient_accumulation_steps", "2", RANKS, str(out), "--sleep", "300",
        ],
        env=cli.accel_env(tmp_path), cwd=str(tmp_path), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    tree: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and len(list(out.glob("rank*-restart0.json"))) < 2:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        assert len(list(out.glob("rank*-restart0.json"))) == 2, "workers did not start in time"
        _check_settings(_records(out))
        tree = psutil.Process(proc.pid).children(recursive=True)
        workers = {int(p.read_text()) for p in out.glob("pid-rank*-restart0")}
        assert workers <= {p.pid for p in tree}
        start = time.monotonic()
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
        assert time.monotonic() - start < 45
        if sig == signal.SIGTERM:
            assert proc.returncode == 128 + signal.SIGTERM, stdout + stderr
            assert "stopped by SIGTERM" in stderr
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and any(_alive(p.pid) for p in tree):
            time.sleep(0.5)
        alive = [p.pid for p in tree if _alive(p.pid)]
        assert not alive, f"left running: {alive}"
    finally:
        for p in [*tree, psutil.Process(proc.pid) if proc.poll() is None else None]:
            if p is not None and _alive(p.pid):
                p.kill()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.timeout(400)
def test_accel_test_on_two_processes(run_accel):
    result = run_accel("test", "--cpu", "--num_processes", "2", plugins=None, timeout=360)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "accel test: 2 process(es)" in result.stdout
    for name in ("state", "operations", "data", "training", "triggers"):
        assert any(
            line.startswith(("PASS " + name, "SKIP " + name)) for line in result.stdout.splitlines()
        ), name
    assert "FAIL" not in result.stdout
    assert os.linesep + "accel test: PASSED" in result.stdout
