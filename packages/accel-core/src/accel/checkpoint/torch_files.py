"""``torch.save`` for checkpoint files, without the CRC-32 of every zip record.

``torch.save`` writes a zip archive and, by default, computes a CRC-32 of every record:
about 0.5 s of CPU per GB on a typical core, as much as the write itself on a fast disk.
``torch.load`` never checks it (a flipped byte loads silently either way), so for
checkpoint files read back with ``torch.load`` the checksum costs time and protects
nothing. accel's checkpoint writers (``optimizer.bin`` and the other ``torch.save``
files of ``save_state``, standard DCP files of sharded states) write without it; the
files load with ``torch.load`` (and DCP's ``FileSystemReader``) exactly as before. Only a
generic zip tool that verifies checksums (``unzip -t``, ``zipfile.testzip``) would
report the records as damaged. ``accelerator.save`` and ``save_model(...,
safe_serialization=False)`` keep torch's default: their files may leave accel.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import IO, TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import os

import torch


class _SaveSettings(Protocol):
    compute_crc32: bool


def _settings() -> _SaveSettings | None:
    """torch's save settings (``torch.utils.serialization.config.save``; torch >= 2.6)."""
    try:
        from torch.utils.serialization import config
    except ImportError:  # an older torch always computes the checksum
        return None
    return config.save if hasattr(config.save, "compute_crc32") else None


@contextlib.contextmanager
def without_zip_crc() -> Generator[None, None, None]:
    """``torch.save`` calls inside skip the zip records' CRC-32; the setting is restored after.

    Recent torch keeps the setting per thread (a ``ContextVar``), so only this thread's saves
    are affected; an older one keeps it process-wide, where another thread's ``torch.save``
    during the block skips the checksum too (harmless: ``torch.load`` never checks it).
    """
    settings = _settings()
    if settings is None:
        yield
        return
    previous = settings.compute_crc32
    settings.compute_crc32 = False
    try:
        yield
    finally:
        settings.compute_crc32 = previous


def save_without_crc(obj: object, f: str | os.PathLike[str] | IO[bytes]) -> None:
    """``torch.save(obj, f)`` without the zip records' CRC-32 (:func:`without_zip_crc`)."""
    with without_zip_crc():
        torch.save(obj, f)
