"""Start real worker processes for a conformance check: torchrun or ``accel launch``, with a timeout.

Each worker asserts what it can see itself and exits non-zero on failure; the caller then
asserts on the exit code and on the files the workers wrote. On a timeout the whole process
group (launcher and workers) is killed, so a hung collective never outlives the test.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

WORKERS = Path(__file__).parent / "workers"
"""Folder of the worker scripts shipped with :mod:`accel.testing`."""

LAUNCHER_VARIABLES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
)
"""Variables a surrounding launcher may have set; removed so the workers get their own."""


class WorkerFailure(AssertionError):
    """The worker processes exited non-zero or ran past their timeout; the message holds their output."""


def clean_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The current environment without ``ACCEL_*``/launcher variables, on the CPU, one thread, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ACCEL_", "ACCELERATE_", "PET_", "TORCHELASTIC_"))
        and k not in LAUNCHER_VARIABLES
    }
    env.update(ACCEL_USE_CPU="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.update(extra or {})
    return env


def accel_executable() -> str | None:
    """Path of the ``accel`` command next to this interpreter (or on ``PATH``), or None without accel-cli."""
    beside = Path(sys.executable).with_name("accel")
    if beside.exists():
        return str(beside)
    return shutil.which("accel")


def torchrun_command(script: str | os.PathLike, args: Sequence[str], nproc: int) -> list[str]:
    """``python -m torch.distributed.run --standalone --nproc_per_node=<nproc> script args``."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "--max_restarts=0",
        str(script),
        *args,
    ]


def accel_launch_command(
    script: str | os.PathLike, args: Sequence[str], nproc: int, config_file: str | os.PathLike
) -> list[str]:
    """``accel launch --config_file <file> --num_processes <nproc> script args`` (needs accel-cli)."""
    accel = accel_executable()
    if accel is None:
        raise FileNotFoundError("the `accel` command is not installed: pip install accel-cli")
    return [
        accel,
        "launch",
        "--config_file",
        str(config_file),
        "--num_processes",
        str(nproc),
        str(script),
        *args,
    ]


def run_command(
    command: Sequence[str],
    env: Mapping[str, str] | None = None,
    timeout: float = 240,
    cwd: str | os.PathLike | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess:
    """Run ``command`` in its own process group; raise :class:`WorkerFailure` on a timeout, and
    on a non-zero exit unless ``check`` is False (then the caller reads ``returncode``)."""
    process = subprocess.Popen(
        list(command),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(env) if env is not None else clean_environment(),
        cwd=cwd,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise WorkerFailure(
            f"{' '.join(command)} ran past {timeout} s\n--- stdout\n{stdout[-5000:]}\n"
            f"--- stderr\n{stderr[-8000:]}"
        ) from None
    if check and process.returncode != 0:
        raise WorkerFailure(
            f"{' '.join(command)} exited with {process.returncode}\n--- stdout\n{stdout[-5000:]}\n"
            f"--- stderr\n{stderr[-8000:]}"
        )
    return subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)


def run_processes(
    script: str | os.PathLike,
    args: Sequence[str] = (),
    nproc: int = 2,
    env: Mapping[str, str] | None = None,
    timeout: float = 240,
    config_file: str | os.PathLike | None = None,
) -> subprocess.CompletedProcess:
    """Run ``script`` on ``nproc`` real processes: through ``accel launch`` when ``config_file`` is given, else torchrun.

    ``env`` is added to :func:`clean_environment`. Raises :class:`WorkerFailure` (an
    AssertionError, so pytest reports it as a failed check) on a non-zero exit or a timeout.
    """
    if config_file is not None:
        command = accel_launch_command(script, args, nproc, config_file)
    else:
        command = torchrun_command(script, args, nproc)
    return run_command(command, env=clean_environment(env), timeout=timeout)


def start_process(
    command: Sequence[str], env: Mapping[str, str], cwd: str | os.PathLike | None = None
) -> subprocess.Popen:
    """Start ``command`` in its own process group, its output captured as text.

    For tests that act on the running job (signals, a second "machine") before
    :func:`finish_processes` collects it.
    """
    return subprocess.Popen(
        list(command),
        env=dict(env),
        cwd=None if cwd is None else str(cwd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish_processes(
    processes: Sequence[subprocess.Popen], timeout: float
) -> list[tuple[int, str, str]]:
    """Wait for every process: ``(exit code, stdout, stderr)`` of each, in order.

    On a timeout every process group is killed and :class:`WorkerFailure` carries their
    output, so a hung launch never outlives the test.
    """
    results = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=timeout)
            results.append((process.returncode, out, err))
    except subprocess.TimeoutExpired:
        for process in processes:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        outputs = "\n".join(
            f"--- {' '.join(map(str, p.args)) if isinstance(p.args, list) else p.args}\n"
            f"{out[-3000:]}\n{err[-5000:]}"
            for p in processes
            for out, err in [p.communicate()]
        )
        raise WorkerFailure(f"ran past {timeout} s:\n{outputs}") from None
    return results
