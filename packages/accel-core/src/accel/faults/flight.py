"""A light flight recorder: each worker's last collectives, one line each, in a per-rank file.

When ``ACCEL_FLIGHT_DIR`` is set (``accel launch`` sets it to a folder it creates), every
accel collective (``gather``, ``reduce``, ``broadcast``, ``wait_for_everyone``, ...) appends
one line to ``<dir>/rank<R>-restart<N>.flight`` *before* entering the collective::

    <seq>\\t<op>\\t<unix time>\\t<call site>

``seq`` counts this process's collectives (every rank calls them in the same order, so
equal numbers are the same collective), the call site is the first stack frame outside
accel and torch. The file starts with a JSON header (rank, world size, process-group
timeout) and ends with an ``exit`` line written by the worker entry point. One ``write``
per collective on an already open file: no flush, no lock, no allocation beyond the line.
A SIGTERM (the launcher stopping the job) dumps the Python stack to ``<...>.stack``.

With NCCL the PyTorch flight recorder is switched on as well (``TORCH_NCCL_TRACE_BUFFER_SIZE``,
dumps on timeout into the same folder) unless those variables are already set.
:mod:`accel.faults.report` turns the files into the launcher's hang report.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time
from datetime import timedelta
from typing import TextIO

from accel.config.core_options import PROCESS_SECTION

_fd: int | None = None
_seq = 0
_stack_file: TextIO | None = None
_SKIP = ("accel.", "accel_", "torch.", "contextlib", "functools")

NCCL_DUMP_PREFIX = "nccl_trace_rank_"
"""File-name prefix of the NCCL flight recorder's dumps in the flight folder."""


def enabled() -> bool:
    """Whether this process records its collectives."""
    return _fd is not None


def _base_name(directory: str, rank: int) -> str:
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or "0"
    return os.path.join(directory, f"rank{rank}-restart{restart}")


def start(
    rank: int, world_size: int, timeout: timedelta | float | None, backend: str | None
) -> None:
    """Open this rank's record (before the process group starts); nothing when ``ACCEL_FLIGHT_DIR`` is unset.

    ``timeout`` is the process group's (a ``timedelta`` or seconds). For NCCL it also turns on
    PyTorch's flight recorder, dumping into the same folder on a timeout.
    """
    global _fd, _seq, _stack_file
    directory = PROCESS_SECTION["flight_dir"].from_env()
    if not directory or _fd is not None:
        return
    if backend == "nccl":
        os.environ.setdefault("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
        os.environ.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
        os.environ.setdefault(
            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", os.path.join(directory, NCCL_DUMP_PREFIX)
        )
    base = _base_name(directory, rank)
    try:
        fd = os.open(base + ".flight", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:
        return
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    header = {
        "rank": rank,
        "world_size": world_size,
        "pid": os.getpid(),
        "timeout": seconds,
        "backend": backend,
        "restart": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0),
        "local_rank": os.environ.get("LOCAL_RANK", "?"),
        "group_rank": os.environ.get("GROUP_RANK", "?"),
        "time": time.time(),
    }
    os.write(fd, (json.dumps(header) + "\n").encode())
    _fd, _seq = fd, 0
    try:  # where it was when the launcher stopped it (the default SIGTERM still ends it)
        _stack_file = open(base + ".stack", "w", encoding="utf-8")  # noqa: SIM115
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            faulthandler.register(signal.SIGTERM, file=_stack_file, all_threads=False, chain=True)
    except (OSError, ValueError, RuntimeError):
        _stack_file = None


def call_site() -> str:
    """``file:line in function`` of the innermost frame outside accel, torch and contextlib."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not (name in ("accel", "torch") or name.startswith(_SKIP)):
            path = frame.f_code.co_filename
            rel = os.path.relpath(path) if os.path.isabs(path) else path
            shown = path if rel.startswith("..") else rel
            return f"{shown}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    return "?"


def record(op: str) -> None:
    """Note that this rank enters collective ``op`` (one line); call it just before the collective."""
    global _seq
    if _fd is None:
        return
    _seq += 1
    try:
        os.write(_fd, f"{_seq}\t{op}\t{time.time():.3f}\t{call_site()}\n".encode())
    except OSError:
        pass


def finish(exit_code: int, error: str = "") -> None:
    """The last line: how this worker ended (written by :mod:`accel.launchers.worker`)."""
    if _fd is None:
        return
    line = json.dumps({"exit": exit_code, "error": error, "time": time.time()})
    try:
        os.write(_fd, f"exit\t{line}\n".encode())
    except OSError:
        pass


def dump_stack() -> None:
    """Write the main thread's Python stack to this rank's ``.stack`` file (before a forced exit)."""
    if _stack_file is not None:
        try:
            faulthandler.dump_traceback(file=_stack_file, all_threads=False)
        except (OSError, ValueError, RuntimeError):
            pass


__all__ = ["NCCL_DUMP_PREFIX", "call_site", "dump_stack", "enabled", "finish", "record", "start"]
