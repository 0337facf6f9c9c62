"""The record each worker leaves at the end of a run, and the line ``accel launch`` prints.

When ``ACCEL_THROUGHPUT_DIR`` is set (``accel launch`` sets it to a folder of its own
unless it is given), each worker that took an optimizer step writes
``rank<N>.json`` there as it exits: :meth:`ThroughputMonitor.summary
<accel.throughput.monitor.ThroughputMonitor.summary>`. After the workers are done the
launcher reads them (:func:`read_records`) and prints :func:`summary_line`. No
collective runs at exit: the whole run is summed from the files. Torch-free.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TypedDict


class RunRecord(TypedDict):
    """One worker's record of its run after the warm-up (:meth:`ThroughputMonitor.summary`)."""

    rank: int
    steps: int
    timed_steps: int
    samples: int
    tokens: int | None
    flops: float | None
    seconds: float
    peak_flops: float | None
    device: str
    dtype: str


class RunTotals(TypedDict):
    """The whole run summed from the workers' records (:func:`combine`)."""

    steps: int
    seconds: float
    samples_per_second: float | None
    tokens_per_second: float | None
    mfu: float | None
    why: str


def record_directory() -> str | None:
    """The folder of the records (the ``throughput_dir`` setting, ``$ACCEL_THROUGHPUT_DIR``), or None."""
    from accel.config.core_options import KEYS

    return KEYS["throughput_dir"].from_env(default=None) or None


def write_record(directory: str | os.PathLike, record: RunRecord) -> Path:
    """Write one worker's record (``rank<N>.json``) atomically; its path."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rank{int(record['rank'])}.json"
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(record), encoding="utf-8")
    os.replace(partial, path)
    return path


def read_records(directory: str | os.PathLike) -> list[RunRecord]:
    """Every worker's record in ``directory``, by rank (unreadable files are left out)."""
    records: list[RunRecord] = []
    for path in Path(directory).glob("rank*.json"):
        try:
            records.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(records, key=lambda r: r.get("rank", 0))


def _rate(value: float) -> str:
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def combine(records: list[RunRecord]) -> RunTotals:
    """The whole run from the workers' records.

    ``steps`` (the most any worker took), ``seconds`` (the longest timed span),
    ``samples_per_second`` / ``tokens_per_second`` (all workers' counts over that span;
    None when unknown), ``mfu`` (all FLOPs over the span, over the sum of the workers'
    peaks; None when a FLOP count or a peak is missing) and ``why`` (what is unknown).
    """
    steps = max(r["steps"] for r in records)
    seconds = max(r["seconds"] for r in records)
    out: RunTotals = {
        "steps": steps,
        "seconds": seconds,
        "samples_per_second": None,
        "tokens_per_second": None,
        "mfu": None,
        "why": "",
    }
    if seconds <= 0:
        warmup = steps - min(r["timed_steps"] for r in records)
        out["why"] = f"too few steps to time (the first {warmup} are warm-up)"
        return out
    out["samples_per_second"] = sum(r["samples"] for r in records) / seconds
    tokens = [r["tokens"] for r in records if r["tokens"] is not None]
    if len(tokens) == len(records):
        out["tokens_per_second"] = sum(tokens) / seconds
    peaks = [r["peak_flops"] for r in records if r["peak_flops"] is not None]
    flops = [r["flops"] for r in records if r["flops"] is not None]
    if len(peaks) < len(records):
        devices = sorted({f"{r['device']} ({r['dtype']})" for r in records if not r["peak_flops"]})
        out["why"] = (
            f"no dense peak known for {', '.join(devices)}: give ThroughputKwargs(peak_flops=...)"
        )
    elif len(flops) < len(records):
        out["why"] = "FLOPs not measured: call accelerator.throughput.measure_flops(model, **batch)"
    else:
        out["mfu"] = sum(flops) / seconds / sum(peaks)
    return out


def summary_line(records: list[RunRecord]) -> str | None:
    """``throughput: 120 optimizer steps, 812 samples/s, 103,974 tokens/s, MFU 41.2%`` (None without records)."""
    if not records:
        return None
    run = combine(records)
    parts = [f"{run['steps']} optimizer step{'s' if run['steps'] != 1 else ''}"]
    for key, unit in (("samples_per_second", "samples/s"), ("tokens_per_second", "tokens/s")):
        value = run[key]
        parts.append(f"{_rate(value) if value is not None else 'unknown'} {unit}")
    mfu = run["mfu"]
    parts.append(f"MFU {mfu * 100:.3g}%" if mfu is not None else "MFU unknown")
    line = "throughput: " + ", ".join(parts)
    return f"{line} ({run['why']})" if run["why"] else line


__all__ = [
    "RunRecord",
    "RunTotals",
    "combine",
    "read_records",
    "record_directory",
    "summary_line",
    "write_record",
]
