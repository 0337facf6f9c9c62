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
from typing import Any


def record_directory() -> str | None:
    """The folder of the records (the ``throughput_dir`` setting, ``$ACCEL_THROUGHPUT_DIR``), or None."""
    from accel.config.core_options import KEYS

    return KEYS["throughput_dir"].from_env(default=None) or None


def write_record(directory: str | os.PathLike, record: dict[str, Any]) -> Path:
    """Write one worker's record (``rank<N>.json``) atomically; its path."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rank{int(record['rank'])}.json"
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(record), encoding="utf-8")
    os.replace(partial, path)
    return path


def read_records(directory: str | os.PathLike) -> list[dict[str, Any]]:
    """Every worker's record in ``directory``, by rank (unreadable files are left out)."""
    records = []
    for path in Path(directory).glob("rank*.json"):
        try:
            records.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(records, key=lambda r: r.get("rank", 0))


def _rate(value: float) -> str:
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def combine(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole run from the workers' records.

    ``steps`` (the most any worker took), ``seconds`` (the longest timed span),
    ``samples_per_second`` / ``tokens_per_second`` (all workers' counts over that span;
    None when unknown), ``mfu`` (all FLOPs over the span, over the sum of the workers'
    peaks; None when a FLOP count or a peak is missing) and ``why`` (what is unknown).
    """
    steps = max(r["steps"] for r in records)
    seconds = max(r["seconds"] for r in records)
    out: dict[str, Any] = {
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
    if all(r["tokens"] is not None for r in records):
        out["tokens_per_second"] = sum(r["tokens"] for r in records) / seconds
    if any(r["peak_flops"] is None for r in records):
        devices = sorted({f"{r['device']} ({r['dtype']})" for r in records if not r["peak_flops"]})
        out["why"] = (
            f"no dense peak known for {', '.join(devices)}: give ThroughputKwargs(peak_flops=...)"
        )
    elif any(r["flops"] is None for r in records):
        out["why"] = "FLOPs not measured: call accelerator.throughput.measure_flops(model, **batch)"
    else:
        out["mfu"] = (
            sum(r["flops"] for r in records) / seconds / sum(r["peak_flops"] for r in records)
        )
    return out


def summary_line(records: list[dict[str, Any]]) -> str | None:
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


__all__ = ["combine", "read_records", "record_directory", "summary_line", "write_record"]
