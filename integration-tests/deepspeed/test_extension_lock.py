"""A lock file left by a killed DeepSpeed op build fails the next run on one line (no wait forever).

Real lock files in a temporary ``TORCH_EXTENSIONS_DIR``: one taken by torch's own
``FileBaton`` in a process that is then killed, old leftovers, and ``accel launch`` /
``Accelerator`` runs that meet one. torch versions that hold an OS lock on the file (2.15)
do not wait on a leftover; ``ACCEL_DEEPSPEED_LOCK_CHECK=on`` checks as the ``FileBaton``
versions need.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("deepspeed")
from accel.testing.processes import accel_executable, clean_environment  # noqa: E402
from accel_deepspeed.locks import (  # noqa: E402
    StaleExtensionLockError,
    check_extension_locks,
    holders,
    lock_files,
    torch_waits_on_lock_file,
)

HOLD = (
    "import sys, time\n"
    "from torch.utils.file_baton import FileBaton\n"
    "baton = FileBaton(sys.argv[1])\n"
    "assert baton.try_acquire()\n"
    "print('held', flush=True)\n"
    "time.sleep(300)\n"
)


def _old_lock(root: Path, name: str = "deepspeed_shm_comm") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "build.ninja").write_text("# a build that was killed\n")
    lock = folder / "lock"
    lock.touch()
    hour_ago = time.time() - 3600
    for item in folder.iterdir():
        os.utime(item, (hour_ago, hour_ago))
    return lock


def _check_in_thread(**kwargs):
    said: list[str] = []
    outcome: dict = {}

    def run():
        try:
            check_extension_locks(say=said.append, poll=0.2, **kwargs)
            outcome["returned"] = True
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, said, outcome


@pytest.mark.timeout(120)
def test_a_killed_filebaton_builder_leaves_a_lock_the_check_names(tmp_path):
    root = tmp_path / "extensions"
    lock = root / "cpu_adam" / "lock"
    lock.parent.mkdir(parents=True)
    builder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert builder.stdout.readline().strip() == "held"
        assert lock_files([root]) == [lock]
        assert holders(lock) == [builder.pid]
        # a live builder is waited for, even when the folder has been quiet
        thread, said, outcome = _check_in_thread(roots=[root], waits_on_lock_file=True, quiet=0)
        time.sleep(2)
        assert thread.is_alive() and not outcome
        assert said == [
            f"accel-deepspeed: waiting for the build of cpu_adam (process {builder.pid})"
        ]
        builder.send_signal(signal.SIGKILL)  # killed midway: FileBaton never removes the file
        builder.wait(timeout=30)
    finally:
        if builder.poll() is None:
            builder.kill()
    thread.join(timeout=30)
    assert lock.exists() and holders(lock) == []
    error = outcome.get("error")
    assert isinstance(error, StaleExtensionLockError), outcome
    message = str(error)
    assert "\n" not in message and f"rm {lock}" in message and "'cpu_adam'" in message


@pytest.mark.timeout(60)
def test_old_leftover_fails_at_once_and_a_recent_one_is_waited_for(tmp_path, monkeypatch):
    monkeypatch.delenv("ACCEL_DEEPSPEED_LOCK_QUIET_SECONDS", raising=False)
    stale = _old_lock(tmp_path / "a", "deepspeed_shm_comm_v1")
    started = time.monotonic()
    with pytest.raises(StaleExtensionLockError, match=f"rm {stale}"):
        check_extension_locks([tmp_path / "a"], waits_on_lock_file=True)
    assert time.monotonic() - started < 10
    # another op's folder and other extensions are not DeepSpeed's: not looked at
    other = _old_lock(tmp_path / "b", "my_extension")
    check_extension_locks([tmp_path / "b"], waits_on_lock_file=True)
    assert other.exists()
    # just written, nobody holding it (a build on another machine sharing the folder, or one
    # that is releasing it): waited for while it changes less than the quiet time ago
    recent = tmp_path / "c" / "fused_adam" / "lock"
    recent.parent.mkdir(parents=True)
    recent.touch()
    thread, said, outcome = _check_in_thread(
        roots=[tmp_path / "c"], waits_on_lock_file=True, quiet=30
    )
    time.sleep(1.5)
    assert thread.is_alive() and len(said) == 1 and str(recent) in said[0]
    recent.unlink()  # the build ended
    thread.join(timeout=10)
    assert outcome == {"returned": True}


def test_auto_mode_checks_only_where_torch_waits_on_the_file(tmp_path, monkeypatch):
    import torch.utils.cpp_extension

    assert torch_waits_on_lock_file() == hasattr(torch.utils.cpp_extension, "FileBaton")
    _old_lock(tmp_path)
    monkeypatch.delenv("ACCEL_DEEPSPEED_LOCK_CHECK", raising=False)
    if torch_waits_on_lock_file():
        with pytest.raises(StaleExtensionLockError):
            check_extension_locks([tmp_path])
    else:  # an OS lock on the file: a leftover file blocks nothing
        check_extension_locks([tmp_path])
    monkeypatch.setenv("ACCEL_DEEPSPEED_LOCK_CHECK", "off")
    check_extension_locks([tmp_path])
    monkeypatch.setenv("ACCEL_DEEPSPEED_LOCK_CHECK", "on")
    with pytest.raises(StaleExtensionLockError):
        check_extension_locks([tmp_path])


def _env(tmp_path: Path) -> dict[str, str]:
    return clean_environment(
        {
            "DS_ACCELERATOR": "cpu",
            "TORCH_EXTENSIONS_DIR": str(tmp_path / "extensions"),
            "ACCEL_DEEPSPEED_LOCK_CHECK": "on",
        }
    )


@pytest.mark.timeout(120)
def test_accel_launch_exits_2_naming_the_file(tmp_path):
    accel = accel_executable()
    if accel is None:
        pytest.skip("the accel command (accel-cli) is not installed")
    lock = _old_lock(tmp_path / "extensions")
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('the workers must not start')\n")
    done = subprocess.run(
        [accel, "launch", "--cpu", "--num_processes", "1", "--use_deepspeed", str(script)],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"rm {lock}" in lines[0], done.stderr
    assert "workers must not start" not in done.stdout + done.stderr


@pytest.mark.timeout(120)
def test_accelerator_with_deepspeed_fails_before_deepspeed_builds(tmp_path):
    lock = _old_lock(tmp_path / "extensions")
    code = (
        "from accel import Accelerator, DeepSpeedPlugin\n"
        "Accelerator(cpu=True, deepspeed_plugin=DeepSpeedPlugin(zero_stage=2))\n"
        "print('no error')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode != 0 and "no error" not in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("accel_deepspeed.locks.StaleExtensionLockError: ")
    assert f"rm {lock}" in last
    assert not (lock.parent / "deepspeed_shm_comm.so").exists()
