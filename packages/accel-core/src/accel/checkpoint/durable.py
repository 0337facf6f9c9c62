"""fsync of checkpoint files and folders: what makes a written checkpoint survive a machine crash.

``os.replace`` makes a file appear whole or not at all to other processes, but after a power
loss or a kernel crash a renamed file may be empty or short, and a new name may be lost,
unless the file's data and its folder's entries were flushed to the disk (``fsync``).
"""

from __future__ import annotations

import os
from pathlib import Path


def sync_tree(folder: Path) -> None:
    """``fsync`` every file under ``folder``, then every folder, deepest first, ``folder`` last.

    Called by every process once its part is written. Another process's file still being
    written under a ``.tmp`` name is left to that process, which syncs its own files.
    """
    for root, _, names in os.walk(folder, topdown=False):
        for name in names:
            if not name.endswith(".tmp"):
                _fsync(Path(root) / name)
        sync_dir(Path(root))


def sync_dir(folder: Path) -> None:
    """``fsync`` the folder ``folder``: its entries (created, renamed files) reach the disk."""
    if os.name == "posix":  # a folder cannot be opened for fsync elsewhere
        _fsync(folder, getattr(os, "O_DIRECTORY", 0))


def _fsync(path: Path, flags: int = 0) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | flags)
    except FileNotFoundError:  # another process's temporary file, renamed meanwhile
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["sync_dir", "sync_tree"]
