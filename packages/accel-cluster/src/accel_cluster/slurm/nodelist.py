"""Expand SLURM host lists (``SLURM_JOB_NODELIST``) into host names, as ``scontrol show hostnames`` does.

A host list is a comma-separated list of items; an item is text with zero or more
bracket groups, each a comma-separated list of numbers and ranges::

    node[01-04,07]      -> node01 node02 node03 node04 node07
    a,b                 -> a b
    gpu-[1-2]           -> gpu-1 gpu-2
    rack[1-2]-n[1-2]    -> rack1-n1 rack1-n2 rack2-n1 rack2-n2

A range keeps the zero padding of its first number (``[08-10]`` gives ``08 09 10``).
"""

from __future__ import annotations

import itertools

from accel.errors import ConfigError


def _split_top_level(text: str, where: str) -> list[str]:
    """Split ``text`` at the commas that are outside brackets."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise ConfigError(f"{where}: nested '[' in host list {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ConfigError(f"{where}: ']' without '[' in host list {text!r}")
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise ConfigError(f"{where}: '[' without ']' in host list {text!r}")
    items.append(text[start:])
    return items


def _expand_group(group: str, text: str, where: str) -> list[str]:
    """The numbers of one bracket group (``01-04,07``), as strings with their padding."""
    out: list[str] = []
    for part in group.split(","):
        part = part.strip()
        low, sep, high = part.partition("-")
        if not low.isdigit() or (sep and not high.isdigit()):
            raise ConfigError(
                f"{where}: {part!r} in host list {text!r} is not a number or a range such as 01-04"
            )
        if not sep:
            out.append(low)
            continue
        first, last = int(low), int(high)
        if last < first:
            raise ConfigError(f"{where}: range {part!r} in host list {text!r} goes backwards")
        width = len(low) if low.startswith("0") else 0
        out.extend(str(n).zfill(width) for n in range(first, last + 1))
    return out


def _expand_item(item: str, text: str, where: str) -> list[str]:
    """Every host of one item: the product of its bracket groups."""
    pieces: list[list[str]] = []
    rest = item
    while "[" in rest:
        head, _, tail = rest.partition("[")
        group, closed, rest = tail.partition("]")
        if not closed:
            raise ConfigError(f"{where}: '[' without ']' in host list {text!r}")
        if not group.strip():
            raise ConfigError(f"{where}: empty brackets in host list {text!r}")
        pieces.append([head])
        pieces.append(_expand_group(group, text, where))
    pieces.append([rest])
    return ["".join(combo) for combo in itertools.product(*pieces)]


def expand_nodelist(text: str, where: str = "SLURM_JOB_NODELIST") -> list[str]:
    """The host names of the SLURM host list ``text``, in order.

    Raises :class:`accel.errors.ConfigError` naming ``where`` for a malformed list
    and for a host named twice (it would get two node ranks).
    """
    text = (text or "").strip()
    if not text:
        raise ConfigError(f"{where}: empty host list; run inside a SLURM allocation")
    hosts: list[str] = []
    for item in _split_top_level(text, where):
        item = item.strip()
        if not item:
            raise ConfigError(f"{where}: empty entry in host list {text!r}")
        hosts.extend(_expand_item(item, text, where))
    seen: set[str] = set()
    for host in hosts:
        if host in seen:
            raise ConfigError(
                f"{where}: host {host!r} appears twice in {text!r}; each node may have only one "
                "node rank"
            )
        seen.add(host)
    return hosts


__all__ = ["expand_nodelist"]
