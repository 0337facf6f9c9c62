"""The launcher's hang report: which collective, who entered it, who never did and why.

Reads the per-rank files of :mod:`accel.faults.flight` (and the failure records of
:mod:`accel.launchers.worker`) after the job ended and, when the ranks' last collectives
do not line up, builds one block of text. Torch-free: ``accel launch`` calls it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .flight import NCCL_DUMP_PREFIX


@dataclass
class Entry:
    """One collective a rank entered."""

    seq: int
    op: str
    time: float
    site: str


@dataclass
class RankRecord:
    """Everything known about one rank of the last attempt."""

    rank: int
    header: dict[str, Any]
    entries: list[Entry] = field(default_factory=list)
    exit: dict[str, Any] | None = None
    """``{"exit", "error", "time"}`` from the worker entry point; None if it was killed."""
    stack: str = ""
    """The Python stack dumped when the launcher stopped it (SIGTERM)."""
    failure: dict[str, Any] | None = None
    """The worker's failure record (error and traceback), if it wrote one."""

    @property
    def last(self) -> Entry | None:
        """The last collective it entered."""
        return self.entries[-1] if self.entries else None


def _read(path: Path) -> RankRecord | None:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        header = json.loads(lines[0])
    except (OSError, ValueError, IndexError):
        return None
    record = RankRecord(int(header["rank"]), header)
    for line in lines[1:]:
        parts = line.split("\t", 3)
        if parts[0] == "exit" and len(parts) == 2:
            try:
                record.exit = json.loads(parts[1])
            except ValueError:
                pass
            continue
        if len(parts) == 4 and parts[0].isdigit():
            record.entries.append(Entry(int(parts[0]), parts[1], float(parts[2]), parts[3]))
    stack = path.with_suffix(".stack")
    if stack.exists():
        try:
            record.stack = stack.read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
    return record


def load(flight_dir: str | Path, failures: list[dict[str, Any]] | None = None) -> list[RankRecord]:
    """The rank records of the last restart attempt found in ``flight_dir``, by rank."""
    found = [r for r in map(_read, Path(flight_dir).glob("rank*-restart*.flight")) if r]
    if not found:
        return []
    last = max(r.header.get("restart", 0) for r in found)
    records = {r.rank: r for r in found if r.header.get("restart", 0) == last}
    for failure in failures or []:
        try:
            rank = int(failure["rank"])
        except (KeyError, TypeError, ValueError):
            continue
        if failure.get("restart", 0) == last and rank in records:
            records[rank].failure = failure
    return [records[k] for k in sorted(records)]


def _library(path: str) -> bool:
    return any(part in path for part in ("/accel/", "/accel_", "/torch/", "<frozen", "runpy"))


def _where_stopped(stack: str) -> str:
    """The innermost user frame of a faulthandler dump (``File "x.py", line 3 in f``)."""
    frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', stack)
    for path, line, name in frames:  # faulthandler prints the innermost frame first
        if not _library(path):
            return f"{Path(path).name}:{line} in {name}"
    return ""


def _short(text: str, width: int = 160) -> str:
    text = re.sub(r"\[[^\]\s]*\.(?:cc|cpp|h):\d+\] ", "", " ".join(str(text).split()))
    return text if len(text) <= width else text[: width - 3] + "..."


def _ending(record: RankRecord) -> str:
    """How a rank ended, in words."""
    if record.failure and record.failure.get("traceback"):
        site = ""
        frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', record.failure["traceback"])
        user = [f for f in frames if not _library(f[0])] or frames
        if user:
            path, line, name = user[-1]
            site = f" at {Path(path).name}:{line} in {name}"
        return f"raised {_short(record.failure.get('error', ''))}{site}"
    if record.exit is not None:
        code = record.exit.get("exit")
        if code == 0:
            return "exited normally (code 0)"
        return f"exited with code {code}" + (
            f": {_short(record.exit['error'])}" if record.exit.get("error") else ""
        )
    where = _where_stopped(record.stack)
    if where:
        return f"was still running, at {where}, when the launcher stopped it"
    return "was still running when the launcher stopped it (or was killed)"


def _ended_at(record: RankRecord) -> float | None:
    for source in (record.exit, record.failure):
        if source and source.get("time"):
            return float(source["time"])
    return None


def diagnose(records: list[RankRecord], prog: str = "accel launch") -> str | None:
    """One block naming the collective the ranks did not all reach, or None when they line up."""
    if not records or not any(r.entries for r in records):
        return None
    world = int(records[0].header.get("world_size") or len(records))
    timeout = records[0].header.get("timeout")
    newest = max((r.last for r in records if r.last), key=lambda e: e.seq)
    seq = newest.seq
    at_seq = [(r, e) for r in records if (e := r.last) is not None and e.seq == seq]
    # the collective most of the ranks that reached this number entered
    ops: dict[str, int] = {}
    for _, e in at_seq:
        ops[e.op] = ops.get(e.op, 0) + 1
    op = max(ops, key=lambda o: ops[o])
    entered = [(r, e) for r, e in at_seq if e.op == op]
    other = [(r, e) for r, e in at_seq if e.op != op]
    reached = {r.rank for r, _ in at_seq}
    behind = [r for r in records if r.rank not in reached]
    missing = sorted(set(range(world)) - {r.rank for r in records})
    if not other and not behind:
        return None
    site = entered[0][1].site
    lines = [f"{prog}: hang in collective {op} #{seq} (called at {site})"]

    def names(rs: list[RankRecord]) -> str:
        return ", ".join(str(r.rank) for r in rs)

    start = min(e.time for _, e in entered)
    ends = [t for t in (_ended_at(r) for r, _ in entered) if t is not None]
    for r, e in entered:
        end = _ended_at(r)
        waited = f"waited {end - e.time:.1f} s, then " if end is not None else ""
        lines.append(f"  rank {r.rank}: entered it; {waited}{_ending(r)}")
    for r, e in other:
        lines.append(
            f"  rank {r.rank}: NEVER ENTERED it: entered {e.op} #{seq} instead "
            f"(at {e.site}), a different collective; it {_ending(r)}"
        )
    for r in behind:
        last = (
            f"its last collective was {r.last.op} #{r.last.seq} at {r.last.site}"
            if r.last
            else "it entered no collective"
        )
        lines.append(f"  rank {r.rank}: NEVER ENTERED it: {last}; it {_ending(r)}")
    for rank in missing:
        lines.append(f"  rank {rank}: no record on this machine")
    never = [r for r, _ in other] + behind
    lines.append(
        f"  entered: rank {names([r for r, _ in entered])}; never entered: rank {names(never)}"
    )
    elapsed = f"{max(ends) - start:.1f} s" if ends else "unknown"
    limit = f" (process-group timeout {timeout:g} s)" if isinstance(timeout, (int, float)) else ""
    lines.append(f"  elapsed from the first rank entering it to the end: {elapsed}{limit}")
    dumps = sorted(Path(records[0].header.get("_dir", "")).glob(f"{NCCL_DUMP_PREFIX}*"))
    if dumps:
        lines.append(f"  NCCL flight recorder dumps: {', '.join(str(d) for d in dumps)}")
    return "\n".join(lines)


def hang_report(
    flight_dir: str | Path, failures: list[dict[str, Any]] | None = None, prog: str = "accel launch"
) -> str | None:
    """:func:`diagnose` of the records in ``flight_dir`` (None when there is no hang to report)."""
    records = load(flight_dir, failures)
    for r in records:
        r.header["_dir"] = str(flight_dir)
    return diagnose(records, prog)


__all__ = ["Entry", "RankRecord", "diagnose", "hang_report", "load"]
