"""Sizes in bytes as people write them (``"10GB"``, ``"500MiB"``) and back; no torch needed."""

from __future__ import annotations

import re


def parse_size(size: int | str) -> int:
    """``"10GB"`` / ``"500MiB"`` / int -> bytes; a decimal unit with a lowercase ``b`` counts
    bits (``"8Gb"`` is 10**9 bytes), as in Accelerate."""
    if isinstance(size, int):
        return size
    match = re.fullmatch(r"\s*([\d.]+)\s*([KMGT]?i?B)?\s*", size.upper().replace("IB", "iB"))
    if not match:
        raise ValueError(
            f"size {size!r}: use an int of bytes or a string like '10GB', '500MB' or '2GiB'"
        )
    bits = bool(match.group(2)) and size.rstrip().endswith("b") and "i" not in match.group(2)
    number = float(match.group(1))
    unit = (match.group(2) or "B").upper()
    factor = {
        "B": 1,
        "KB": 10**3,
        "MB": 10**6,
        "GB": 10**9,
        "TB": 10**12,
        "KIB": 2**10,
        "MIB": 2**20,
        "GIB": 2**30,
        "TIB": 2**40,
    }[unit]
    return int(number * factor) // 8 if bits else int(number * factor)


def convert_file_size_to_int(size: int | str) -> int:
    """``"5GB"`` / ``"5GiB"`` / int -> bytes (Accelerate's name for :func:`parse_size`)."""
    return parse_size(size)


def convert_bytes(size: float) -> str:
    """A number of bytes as text with a binary unit, e.g. ``"1.5 GB"`` for ``1.5 * 2**30``."""
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if size < 1024.0:
            return f"{round(size, 2)} {unit}"
        size /= 1024.0
    return f"{round(size, 2)} PB"


__all__ = ["convert_bytes", "convert_file_size_to_int", "parse_size"]
