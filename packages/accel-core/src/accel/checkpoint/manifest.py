"""The manifest of a checkpoint folder: what a complete checkpoint holds, written last.

``save_state`` writes ``accel_manifest.json`` after every other file of the checkpoint
(every rank's shards included): each file's path and size, the world size and the accel
version. A folder whose files do not match its manifest was cut short (a killed process,
a full disk, a partial copy): :func:`problems` says which file is missing or truncated.
Sizes are checked, not checksums: a truncated or missing file is what a crash leaves, and
hashing gigabytes at every save would cost more than the write.
"""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path
from typing import TypedDict, cast

from accel.checkpoint.durable import sync_dir

MANIFEST_NAME = "accel_manifest.json"
"""File name of the manifest inside a checkpoint folder."""

FORMAT = 1
"""Version of the manifest's layout."""


class Manifest(TypedDict, total=False):
    """A checkpoint's manifest (its JSON file; extra keys of :func:`write_manifest` besides)."""

    format: int
    accel_version: str | None
    world_size: int
    files: dict[str, int] | None
    """Every file of the checkpoint and its size in bytes (None: the manifest is unreadable)."""


def _version() -> str | None:
    try:
        return metadata.version("accel-core")
    except metadata.PackageNotFoundError:
        return None


def _files(folder: Path) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = Path(root) / name
            relative = path.relative_to(folder).as_posix()
            if relative != MANIFEST_NAME:
                sizes[relative] = path.stat().st_size
    return dict(sorted(sizes.items()))


def write_manifest(folder: str | os.PathLike, world_size: int, **extra: object) -> Path:
    """Record every file now in ``folder`` (call once every rank has written its part)."""
    folder = Path(folder)
    data = {
        "format": FORMAT,
        "accel_version": _version(),
        "world_size": world_size,
        "files": _files(folder),
        **extra,
    }
    path = folder / MANIFEST_NAME
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    sync_dir(folder)  # the manifest's name, with the data files' already synced
    return path


def read_manifest(folder: str | os.PathLike) -> Manifest | None:
    """The manifest of ``folder``, or None when it has none (an older or foreign checkpoint)."""
    path = Path(folder) / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return cast(Manifest, json.load(f))
    except (OSError, ValueError):
        return {"files": None}


def problems(folder: str | os.PathLike, require_manifest: bool = False) -> list[str]:
    """What makes ``folder`` an incomplete checkpoint; empty when it matches its manifest.

    A folder without a manifest passes unless ``require_manifest`` (checkpoints written by
    Accelerate or an older accel have none).
    """
    folder = Path(folder)
    if not folder.is_dir():
        return [f"{folder} does not exist"]
    manifest = read_manifest(folder)
    if manifest is None:
        return (
            [f"{folder} has no {MANIFEST_NAME}: it was not completely written"]
            if require_manifest
            else []
        )
    files = manifest.get("files")
    if not isinstance(files, dict):
        return [f"{folder / MANIFEST_NAME} is unreadable or damaged"]
    found: list[str] = []
    for name, size in files.items():
        path = folder / name
        if not path.is_file():
            found.append(f"{path} is missing")
        elif path.stat().st_size != size:
            found.append(
                f"{path} is truncated or changed: {path.stat().st_size} bytes, expected {size}"
            )
    return found
