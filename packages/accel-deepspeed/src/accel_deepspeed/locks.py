"""Stale lock files of DeepSpeed's JIT-built C++ ops, found before DeepSpeed builds them.

DeepSpeed builds its ops (``deepspeed_shm_comm`` on the CPU, ``cpu_adam``, ``fused_adam``,
...) with ``torch.utils.cpp_extension.load``, which takes ``<extensions dir>/<op>/lock``.
In torch versions whose build waits for that file to disappear (``FileBaton``), a build
killed midway leaves the file behind and every later run waits on it forever. Newer torch
versions hold an OS lock on the file instead, which the kernel drops with the process: a
leftover file is harmless there and nothing is checked.

A lock file is stale when no process on this machine has it open and neither it nor any
file next to it changed for :data:`QUIET_SECONDS` (``ACCEL_DEEPSPEED_LOCK_QUIET_SECONDS``).
While its builder lives (or files change: a build on another machine sharing the folder),
the check waits for the build, and fails as soon as the builder is gone. Torch-free.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import time
from pathlib import Path

from accel.config.options import Option
from accel.errors import UsageError

QUIET_SECONDS = 120.0
"""How long a lock file with no process holding it must sit unchanged to be called stale."""

OP_NAMES = (
    "deepspeed_shm_comm",
    "deepspeed_ccl_comm",
    "cpu_adam",
    "cpu_adagrad",
    "cpu_lion",
    "fused_adam",
    "fused_lamb",
    "fused_lion",
    "async_io",
    "transformer_inference",
    "quantizer",
    "evoformer_attn",
    "ragged_device_ops",
    "inference_core_ops",
)
"""Build folders (``name`` or ``name_v<N>``) of the DeepSpeed ops checked."""


class StaleExtensionLockError(UsageError, RuntimeError):
    """A DeepSpeed op's build lock was left by a killed build; the message names the file to remove."""


def torch_waits_on_lock_file() -> bool:
    """Whether this torch's extension build waits for its lock file to be deleted (``FileBaton``).

    Read from the source of ``torch.utils.cpp_extension`` without importing torch.
    """
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    source = Path(next(iter(spec.submodule_search_locations))) / "utils" / "cpp_extension.py"
    try:
        return "FileBaton(" in source.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


LOCK_CHECK = Option(
    "deepspeed_lock_check",
    bool,
    "auto",
    extra=("auto",),
    help="check for a stale extension lock: on, off or auto",
    env="ACCEL_DEEPSPEED_LOCK_CHECK",
    flag=None,
    in_file=False,
)
"""``ACCEL_DEEPSPEED_LOCK_CHECK``: ``on`` / ``off`` (any yes/no), or ``auto`` (default)."""

LOCK_QUIET_SECONDS = Option(
    "deepspeed_lock_quiet_seconds",
    float,
    None,
    minimum=0.0,
    help="seconds a lock's folder must stay unchanged to count as stale",
    env="ACCEL_DEEPSPEED_LOCK_QUIET_SECONDS",
    flag=None,
    in_file=False,
)
"""``ACCEL_DEEPSPEED_LOCK_QUIET_SECONDS``: overrides :data:`QUIET_SECONDS`."""


def lock_check_mode() -> bool:
    """Whether to check: ``$ACCEL_DEEPSPEED_LOCK_CHECK`` ``on`` / ``off``, or ``auto`` (default):
    when :func:`torch_waits_on_lock_file`."""
    value = LOCK_CHECK.from_env()
    if value == "auto":
        return torch_waits_on_lock_file()
    return value


def extension_roots() -> list[Path]:
    """The folders torch builds extensions in: ``$TORCH_EXTENSIONS_DIR``, or the default
    ``<user cache>/torch_extensions/py<version>_<accelerator>`` folders of this Python."""
    configured = os.environ.get("TORCH_EXTENSIONS_DIR")
    if configured:
        return [Path(configured)]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    base = Path(cache) / "torch_extensions"
    tag = f"py{sys.version_info.major}{sys.version_info.minor}{getattr(sys, 'abiflags', '')}_"
    try:
        return sorted(p for p in base.iterdir() if p.name.startswith(tag) and p.is_dir())
    except OSError:
        return []


def lock_files(roots: list[Path], names: tuple[str, ...] = OP_NAMES) -> list[Path]:
    """The ``lock`` files present in the build folders of ``names`` under ``roots``."""
    pattern = re.compile(rf"^({'|'.join(map(re.escape, names))})(_v\d+)?$")
    found = []
    for root in roots:
        try:
            folders = sorted(root.iterdir())
        except OSError:
            continue
        for folder in folders:
            lock = folder / "lock"
            if pattern.match(folder.name) and lock.exists():
                found.append(lock)
    return found


def holders(path: Path) -> list[int] | None:
    """Ids of the processes on this machine that have ``path`` open; None when that cannot be
    known (no ``/proc``, or processes of the file's owner whose open files are not readable)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    try:
        target = os.path.realpath(path)
        owner = path.stat().st_uid
    except OSError:
        return []
    me = os.getuid()
    found, unknown = [], False
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:
            try:
                uid = entry.stat().st_uid
            except OSError:
                continue  # gone meanwhile
            unknown = unknown or (uid == owner and me not in (0, uid))
            continue
        for fd in fds:
            try:
                if os.readlink(fd) == target:
                    found.append(int(entry.name))
                    break
            except OSError:
                continue
    if not found and unknown:
        return None
    return found


def _last_change(lock: Path) -> float:
    """The newest modification time of the lock file and the files next to it."""
    newest = lock.stat().st_mtime
    for item in lock.parent.iterdir():
        try:
            newest = max(newest, item.stat().st_mtime)
        except OSError:
            continue
    return newest


def quiet_seconds() -> float:
    """:data:`QUIET_SECONDS`, or ``$ACCEL_DEEPSPEED_LOCK_QUIET_SECONDS``."""
    return LOCK_QUIET_SECONDS.from_env(default=QUIET_SECONDS)


def stale_message(lock: Path) -> str:
    """The one-line error for a stale lock."""
    return (
        f"DeepSpeed's build of the C++ op {lock.parent.name!r} is locked by {lock}, left by a build "
        f"that was stopped (no process holds it): remove that file (rm {lock}) and run again"
    )


def check_extension_locks(
    roots: list[Path] | None = None,
    *,
    waits_on_lock_file: bool | None = None,
    quiet: float | None = None,
    poll: float = 1.0,
    say=None,
) -> None:
    """Raise :class:`StaleExtensionLockError` on a stale DeepSpeed op lock; wait out live builds.

    Nothing is checked when torch does not wait on lock files (``waits_on_lock_file`` None:
    :func:`lock_check_mode`). ``roots`` defaults to :func:`extension_roots`; ``quiet`` to
    :func:`quiet_seconds`. ``say`` (default: a line on stderr) reports a build waited for.
    """
    if waits_on_lock_file is None:
        waits_on_lock_file = lock_check_mode()
    if not waits_on_lock_file:
        return
    roots = extension_roots() if roots is None else roots
    quiet = quiet_seconds() if quiet is None else quiet
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    told: set[Path] = set()
    while True:
        waiting = False
        for lock in lock_files(roots):
            try:
                pids = holders(lock)
                idle = time.time() - _last_change(lock)
            except FileNotFoundError:
                continue  # the build just finished
            if pids:
                waiting = True
                if lock not in told:
                    told.add(lock)
                    say(
                        f"accel-deepspeed: waiting for the build of {lock.parent.name} (process {pids[0]})"
                    )
                continue
            if idle >= quiet:
                if lock.exists():
                    raise StaleExtensionLockError(stale_message(lock))
                continue
            waiting = True  # changed lately and no holder seen: a build elsewhere, or just released
            if lock not in told:
                told.add(lock)
                say(
                    f"accel-deepspeed: {lock} is there with no process holding it; waiting up to "
                    f"{quiet - idle:.0f} s for it to go (a build on another machine?)"
                )
        if not waiting:
            return
        time.sleep(poll)
