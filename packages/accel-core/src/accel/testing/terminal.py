"""Run a command on a real pseudo-terminal and read what a user would see (progress bars).

POSIX only (``pty``); the tests that use it check what differs between a terminal and a pipe.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def run_on_terminal(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    timeout: float = 240,
    columns: int = 120,
) -> tuple[int, str]:
    """Run ``argv`` with stdin/stdout/stderr on a pseudo-terminal of 24 x ``columns``.

    Returns the exit status and everything written to the terminal. On ``timeout`` the process
    is killed and an AssertionError shows the output so far.
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(
        list(argv), stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=dict(env), close_fds=True
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError("timed out:\n" + b"".join(chunks).decode(errors="replace"))
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    return proc.wait(timeout=30), b"".join(chunks).decode(errors="replace")


def environment_without_accel(**extra: str) -> dict[str, str]:
    """This process's environment without any ``ACCEL_*`` variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env.update(extra)
    return env
