"""Pieces around the XLA runtime that need no device: per-thread state, notebook hand-over."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest

THREADS = textwrap.dedent(
    """
    import threading
    from accel.state import GradientState, use_thread_local_state

    GradientState().step = 7
    use_thread_local_state()
    use_thread_local_state()  # idempotent
    assert GradientState().step == 0  # a fresh state in this thread too
    seen = {}

    def replica(index):
        state = GradientState()
        state.step = index
        barrier.wait()  # both threads have written before either reads
        seen[index] = GradientState().step

    barrier = threading.Barrier(2)
    threads = [threading.Thread(target=replica, args=(i,)) for i in (0, 1)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert seen == {0: 0, 1: 1}, seen

    # a replica that raises is recorded for accel launch, with its ordinal
    import json, os, sys
    from pathlib import Path
    from accel_tpu.replica import Replica

    os.environ["ACCEL_LAUNCH_ERROR_DIR"] = sys.argv[1]
    try:
        Replica(lambda: 1 / 0)(1)
    except ZeroDivisionError:
        pass
    [record] = [json.loads(p.read_text()) for p in Path(sys.argv[1]).glob("*.json")]
    assert record["rank"] == 1 and record["error"].startswith("ZeroDivisionError"), record
    assert "in <lambda>" in record["traceback"], record
    print("ok")
    """
)


def test_each_thread_gets_its_own_state_and_failures_are_recorded(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", THREADS, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


HAS_XLA = importlib.util.find_spec("torch_xla") is not None
NEEDS_XLA = pytest.mark.skipif(
    not HAS_XLA,
    reason="needs torch_xla: runs in packages/accel-tpu/xla-env (bash .ci/after.d/tpu.sh)",
)


@pytest.mark.parametrize(
    ("env", "claimed"),
    [
        pytest.param({"PJRT_DEVICE": "TPU"}, True, marks=NEEDS_XLA),
        pytest.param({"COLAB_TPU_ADDR": "10.0.0.2:8470"}, True, marks=NEEDS_XLA),
        pytest.param({"ACCEL_DISTRIBUTED_TYPE": "TPU"}, True, marks=NEEDS_XLA),
        ({"PJRT_DEVICE": "CPU", "ACCEL_USE_CPU": "1"}, False),  # debug_launcher forces the CPU
        ({}, False),
    ],
)
def test_notebook_launcher_goes_to_xla_only_next_to_a_device(monkeypatch, env, claimed):
    from accel_tpu.launcher import TPU_HINTS, XLALauncher

    for name in (*TPU_HINTS, "ACCEL_USE_CPU", "ACCEL_DISTRIBUTED_TYPE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert XLALauncher().claims_notebook() is claimed


@pytest.mark.skipif(HAS_XLA, reason="checks the environment without torch_xla")
def test_notebook_launcher_stays_local_without_torch_xla(monkeypatch):
    """Next to a TPU but without torch_xla installed, notebook_launcher keeps core's launcher."""
    from accel_tpu.launcher import XLALauncher

    monkeypatch.delenv("ACCEL_USE_CPU", raising=False)
    monkeypatch.setenv("PJRT_DEVICE", "TPU")
    monkeypatch.setenv("ACCEL_DISTRIBUTED_TYPE", "XLA")
    assert XLALauncher().claims_notebook() is False
