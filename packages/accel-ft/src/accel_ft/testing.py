"""Run a script under ``accel launch --ft``, kill replica groups, and check what happened.

Used by accel-ft's tests and by ``tools/bench/ft_failures.py``. The script is expected to
write the records of ``packages/accel-ft/tests/workers/ft_train.py``: one JSON line per event
in ``<out>/group<G>.jsonl`` (``start``; ``fetch`` before and ``step`` after each step;
``end`` with the full-data loss from the quorum's first group).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .supervisor import die_with_parent

HEAL_LINE = re.compile(
    r"replica group (\d+) healed from group (\d+) at step (\d+) \(live copy, ([\d.]+) s\)"
)
LOST_LINE = re.compile(r"replica group (\d+) lost at step (\d+): continuing with (\d+) of (\d+)")


def read_records(out: Path) -> dict[int, list[dict[str, Any]]]:
    """Every group's records, by group, in the order written (a torn last line is dropped)."""
    records: dict[int, list[dict[str, Any]]] = {}
    for path in sorted(out.glob("group*.jsonl")):
        group = int(path.stem[len("group") :])
        rows = []
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
        records[group] = rows
    return records


@dataclass
class FaultRun:
    """One ``accel launch --ft`` run of ``script`` writing its records under ``out``.

    With ``ft=False`` the same script runs as accel's usual restart-and-resume job instead:
    ``groups`` DDP processes under torchrun with restarts (``--max_restarts``).
    """

    script: Path
    out: Path
    groups: int = 3
    ft: bool = True
    script_args: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    process: subprocess.Popen | None = None
    kills: list[tuple[int, float]] = field(default_factory=list)
    """(group, time) of each kill."""

    def start(self) -> None:
        """Start the launch (its output goes to ``out/launch.log``)."""
        self.out.mkdir(parents=True, exist_ok=True)
        if self.ft:
            mode = ["--ft", "--ft_replica_groups", str(self.groups)]
        else:
            mode = ["--cpu", "--num_processes", str(self.groups), "--max_restarts", "100"]
        command = [
            sys.executable,
            "-m",
            "accel_cli",
            "launch",
            *mode,
            *self.flags,
            str(self.script),
            "--out",
            str(self.out),
            *self.script_args,
        ]
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
        log = open(self.out / "launch.log", "wb")
        self.process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=die_with_parent
        )

    def records(self) -> dict[int, list[dict[str, Any]]]:
        """The records written so far."""
        return read_records(self.out)

    def log(self) -> str:
        """The launch's output so far."""
        path = self.out / "launch.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``predicate`` until true; fails with ``what`` after ``timeout`` or if the run ended."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(
                    f"the run ended while waiting for {what}:\n{self.log()[-3000:]}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n{self.log()[-3000:]}")
            time.sleep(0.1)

    def committed_steps(self, group: int) -> int:
        """Steps the group recorded as committed since its latest start."""
        rows = self.records().get(group, [])
        starts = [i for i, r in enumerate(rows) if r["event"] == "start"]
        since = rows[starts[-1] :] if starts else []
        return sum(1 for r in since if r["event"] == "step" and r["committed"])

    def worker_pid(self, group: int) -> int:
        """The pid of the group's current worker (its latest ``start`` record)."""
        starts = [r for r in self.records().get(group, []) if r["event"] == "start"]
        return int(starts[-1]["pid"])

    def kill(self, group: int) -> None:
        """SIGKILL the group's worker; its torchrun restarts it."""
        os.kill(self.worker_pid(group), signal.SIGKILL)
        self.kills.append((group, time.time()))

    def finish(self, timeout: float) -> int:
        """Wait for the launch to end; its exit status."""
        assert self.process is not None
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            self.process.wait(timeout=30)
            raise AssertionError(
                f"the run did not end within {timeout} s:\n{self.log()[-3000:]}"
            ) from None


@dataclass
class Analysis:
    """What the records of a run say."""

    starts: dict[int, int]
    """Worker starts per group (1: never restarted)."""
    committed: int
    """Committed steps of the run."""
    digest_mismatches: list[str]
    """Steps after which groups' parameters and optimizer states differ (empty: bitwise equal)."""
    schedule_mismatches: list[str]
    """Committed steps after which the scheduler had not stepped once per committed step."""
    healed_steps_checked: int
    """Committed steps of a healed worker whose digest was compared with a peer's."""
    trained: dict[int, list[int]]
    """Per epoch: the sample ids trained by committed steps (padding excluded)."""
    skipped: list[int]
    """Sample ids recorded as skipped (``ft_failed_step: skip``)."""
    full_loss: float | None
    """The full-data loss at the end (from the quorum's first group)."""
    step_times: list[float]
    """Wall time of each committed step (the first group's records to end)."""
    losses: list[tuple[int, float]]
    """(samples trained before the step, mean loss over the step's groups) per committed step."""


def analyse(out: Path, samples: int, global_batch: int) -> Analysis:
    """Check a finished run's records (see :class:`Analysis`); ``global_batch``: samples per step."""
    records = read_records(out)
    starts = {g: sum(1 for r in rows if r["event"] == "start") for g, rows in records.items()}
    # an attempt is a (epoch, start, members) triple: it committed if any group saw it commit
    committed_attempts: set[tuple] = set()
    digests: dict[int, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    healed: set[tuple[int, int]] = set()
    schedule: list[str] = []
    losses: dict[tuple, list[float]] = defaultdict(list)
    times: dict[int, float] = {}
    for group, rows in records.items():
        restarted = False
        for row in rows:
            if row["event"] == "start":
                restarted = row["restart"] > 0
            if row["event"] != "step" or not row["committed"]:
                continue
            key = (row["epoch"], row["start"], tuple(row["members"]))
            committed_attempts.add(key)
            if "schedule" in row and row["schedule"] != row["commits"]:
                schedule.append(
                    f"group {group} step {row['step']}: {row['commits']} commits, "
                    f"scheduler stepped {row['schedule']} times"
                )
            digests[row["step"]][group].add(row["digest"])
            losses[key].append(row["loss"])
            times.setdefault(row["step"], row["time"])
            if restarted:
                healed.add((group, row["step"]))
    mismatches = []
    checked = 0
    for step, by_group in sorted(digests.items()):
        values = set().union(*by_group.values())
        if len(values) > 1:
            mismatches.append(f"step {step}: {dict(by_group)}")
        elif any((g, step) in healed for g in by_group) and len(by_group) > 1:
            checked += 1
    trained: dict[int, list[int]] = defaultdict(list)
    seen_fetch: set[tuple] = set()
    for group, rows in records.items():
        for row in rows:
            if row["event"] != "fetch":
                continue
            key = (row["epoch"], row["start"], tuple(row["members"]))
            if key not in committed_attempts or (group, *key) in seen_fetch:
                continue
            seen_fetch.add((group, *key))
            parts = len(row["members"])
            rank = row["members"].index(group)
            low = rank * global_batch // parts
            real = max(0, min(len(row["ids"]), samples - row["start"] - low))  # rest: padding
            trained[row["epoch"]].extend(row["ids"][:real])
    ends = [r for rows in records.values() for r in rows if r["event"] == "end"]
    ordered = sorted(times.values())
    step_times = [b - a for a, b in zip(ordered, ordered[1:])]
    curve = sorted(
        (epoch * samples + start, sum(v) / len(v)) for (epoch, start, _), v in losses.items()
    )
    return Analysis(
        starts=starts,
        committed=len(committed_attempts),
        digest_mismatches=mismatches,
        schedule_mismatches=schedule,
        healed_steps_checked=checked,
        trained=dict(trained),
        skipped=list(ends[-1]["skipped"]) if ends else [],
        full_loss=ends[-1]["full_loss"] if ends else None,
        step_times=step_times,
        losses=curve,
    )


def fault_free_loss(
    samples: int, batch_size: int, groups: int, epochs: int, lr: float, data_seed: int = 7
) -> float:
    """The full-data loss of ``ft_train.py``'s training without failures, in one process.

    The same data, initial weights, optimizer, schedule and global sample order; each step
    trains ``groups x batch_size`` samples (the last one of an epoch padded from its start).
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: one thread is fastest, and shares the machine
    try:
        return _fault_free_loss(samples, batch_size, groups, epochs, lr, data_seed)
    finally:
        torch.set_num_threads(threads)


def _fault_free_loss(
    samples: int, batch_size: int, groups: int, epochs: int, lr: float, data_seed: int
) -> float:
    import torch

    g = torch.Generator().manual_seed(1234)
    x = torch.randn(samples, 16, generator=g)
    w = torch.randn(16, 1, generator=g)
    y = x @ w + 0.1 * torch.randn(samples, 1, generator=g)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=50, gamma=0.9)
    per_step = groups * batch_size
    for epoch in range(epochs):
        order = torch.randperm(samples, generator=torch.Generator().manual_seed(data_seed + epoch))
        for start in range(0, samples, per_step):
            idx = order[[(start + k) % samples for k in range(per_step)]]
            loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
    with torch.no_grad():
        return torch.nn.functional.mse_loss(model(x), y).item()


def listening_sockets(root: int) -> list[tuple[int, str, int]]:
    """(pid, address, port) of each TCP socket that ``root`` or a descendant listens on (Linux).

    Read from ``/proc``: the process tree by parent pid, each process's socket inodes, and
    the listening entries (state ``0A``) of ``/proc/net/tcp`` and ``tcp6``.
    """
    children: dict[int, list[int]] = defaultdict(list)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the process ended meanwhile
        children[parent].append(int(stat.parent.name))
    owner: dict[str, int] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        todo.extend(children[pid])
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                owner[target[len("socket:[") : -1]] = pid
    found = []
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] != "0A" or cols[9] not in owner:
                continue
            address, port = cols[1].split(":")
            raw = bytes.fromhex(address)  # 32-bit words in host (little-endian) order
            packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.append((owner[cols[9]], socket.inet_ntop(family, packed), int(port, 16)))
    return found


def is_loopback(address: str) -> bool:
    """Whether a listening address accepts connections from this machine only."""
    return address.startswith("127.") or address in ("::1", "::ffff:127.0.0.1")


def heal_lines(log: str) -> list[tuple[int, int, int, float]]:
    """(group, source group, step, seconds) of each ``healed from`` line of a launch's output."""
    return [(int(a), int(b), int(c), float(d)) for a, b, c, d in HEAL_LINE.findall(log)]


def lost_lines(log: str) -> list[tuple[int, int, int, int]]:
    """(group, step, quorum size, largest quorum) of each ``lost at step`` line."""
    return [(int(a), int(b), int(c), int(d)) for a, b, c, d in LOST_LINE.findall(log)]


__all__ = [
    "Analysis",
    "FaultRun",
    "analyse",
    "fault_free_loss",
    "heal_lines",
    "is_loopback",
    "listening_sockets",
    "lost_lines",
    "read_records",
]
