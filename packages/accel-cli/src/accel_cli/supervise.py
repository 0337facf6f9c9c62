"""Run ``torch.distributed.run`` as a child: forward signals, leave nothing running, report failures.

The torchelastic agent owns the workers (each in its own session) and stops them
when it receives SIGINT/SIGTERM. This module forwards those signals to the agent,
kills it if it does not stop in time, and afterwards prints which rank failed and
the last lines of its traceback (written by :mod:`accel.launchers.worker`), or, when the ranks' last
collectives do not line up, one hang report (:mod:`accel.faults.report`), or that the job
was preempted (every worker saved a checkpoint and exited 75). After a run that succeeded it
prints the run's throughput line (:mod:`accel.throughput.summary`). torch's own report of the
failure (its ``ChildFailedError`` traceback) is left out (:mod:`accel_cli.agent`) unless
``debug`` is set (``accel launch --debug``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .agent import RENDEZVOUS_LOST

GRACE_SECONDS = 30.0
"""How long the agent may take to stop its workers after a forwarded signal."""

_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
PREEMPTED = 75
"""Exit code of ``accel launch`` when every worker saved a preemption checkpoint (accel.faults.preemption)."""
USAGE_ERROR = 2
"""Exit status of a launched program (torchrun, the Ray driver) that refused to start the job.

Such a program has printed its reason and no worker has left a record, so the summary
adds nothing (a worker script's own exit status 2 comes with a record).
"""
TAIL_LINES = 6
"""How many last lines of the failing rank's traceback the summary repeats."""


def supervise(
    command: list[str], env: dict[str, str], prog: str = "accel launch", debug: bool = False
) -> int:
    """Run ``command`` (an argv list, no shell) to completion; its exit status.

    A failing worker's rank and the end of its traceback are printed after the agent exits;
    torch's own failure report only with ``debug``.
    """
    from accel import env_vars
    from accel.config.core_options import KEYS, PROCESS_SECTION

    program, original = program_name(command), command
    if not debug:
        command = quiet_agent(command)

    error_dir = tempfile.mkdtemp(prefix="accel-launch-")
    env = dict(env)
    env[env_vars.LAUNCH_ERROR_DIR] = error_dir
    flight_dir = PROCESS_SECTION["flight_dir"].from_env(env) or os.path.join(error_dir, "flight")
    os.makedirs(flight_dir, exist_ok=True)
    env[env_vars.FLIGHT_DIR] = flight_dir  # each worker's last collectives (hang reports)
    throughput_dir = KEYS["throughput_dir"].from_env(env, default=None) or os.path.join(
        error_dir, "throughput"
    )
    env[env_vars.THROUGHPUT_DIR] = throughput_dir  # each worker's throughput record at exit
    grace = _grace_seconds(env)
    received: list[int] = []
    try:
        proc = subprocess.Popen(
            command, env=env, start_new_session=True, preexec_fn=_parent_death_signal()
        )
    except OSError as exc:
        shutil.rmtree(error_dir, ignore_errors=True)
        sys.stderr.write(f"{prog}: error: cannot start {command[0]}: {exc.strerror}\n")
        return 2

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        if len(received) > 1 and received.count(signum) > 1:
            _kill_group(proc)  # asked twice: stop now
            return
        try:
            os.kill(proc.pid, signum)
        except ProcessLookupError:
            pass

    previous = {}
    for sig in _FORWARDED:
        try:
            previous[sig] = signal.signal(sig, forward)
        except (ValueError, OSError):  # not the main thread, or not settable
            continue
    try:
        code = _wait(proc, received, grace)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    try:
        if code == RENDEZVOUS_LOST and command != original and not received:
            # the wrapped torchrun agent (accel_cli.agent) could not reach the rendezvous store
            sys.stderr.write(endpoint_lost_line(original, prog) + "\n")
            return 1
        if code == 0:
            _print_throughput(throughput_dir, prog)
        if code != 0:
            records = _records(Path(error_dir))
            if _preempted(records):
                sys.stderr.write(
                    f"{prog}: preempted: every worker saved a checkpoint and exited with "
                    f"{PREEMPTED}; run the same command again to resume\n"
                )
                return PREEMPTED
            from accel.faults.report import hang_report

            hang = hang_report(flight_dir, records, prog)
            _report(records, code, received, prog, hang, program)
            if not received and records and all(r.get("refused") for r in records):
                code = USAGE_ERROR
    finally:
        if not any(Path(flight_dir).glob("nccl_trace_rank_*")):  # keep NCCL dumps it names
            shutil.rmtree(error_dir, ignore_errors=True)
    if received and code != 0:
        return 128 + received[0] if received[0] in (signal.SIGINT, signal.SIGTERM) else code
    return code


def endpoint_lost_line(command: list[str], prog: str = "accel launch") -> str:
    """The one line of an agent of ``command`` that lost its rendezvous endpoint (:mod:`accel_cli.agent`)."""
    endpoint = _flag(command, "--rdzv_endpoint") or (
        f"{_flag(command, '--master_addr')}:{_flag(command, '--master_port')}"
    )
    return (
        f"{prog}: error: the rendezvous endpoint {endpoint} was lost: the agent that hosted "
        "the c10d rendezvous store (on that node) ended, and this node cannot rejoin without "
        "it; restart the job with an endpoint on a node that stays up "
        "(docs/fault-tolerance.md): it resumes from the newest checkpoint"
    )


def _flag(command: list[str], name: str) -> str | None:
    """The value of the option ``name`` in ``command`` (``--name value`` or ``--name=value``)."""
    for index, item in enumerate(command):
        if item == name and index + 1 < len(command):
            return command[index + 1]
        if item.startswith(f"{name}="):
            return item.split("=", 1)[1]
    return None


def _print_throughput(directory: str, prog: str) -> None:
    """The run's throughput line, from the records the workers left (nothing without any)."""
    from accel.throughput.summary import read_records, summary_line

    line = summary_line(read_records(directory))
    if line:
        sys.stderr.write(f"{prog}: {line}\n")


def quiet_agent(command: list[str]) -> list[str]:
    """``command`` with a ``python -m torch.distributed.run`` agent run through :mod:`accel_cli.agent`."""
    from .agent import AGENT_MODULE

    if command[1:3] != ["-m", AGENT_MODULE]:
        return command  # another launcher's program: left as it is
    return [command[0], "-m", "accel_cli.agent", *command[1:]]


def _parent_death_signal():
    """A preexec function making the kernel send SIGTERM to the agent if this launcher dies
    (even by SIGKILL), so the agent stops its workers; None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None

    def set_pdeathsig() -> None:
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG

    return set_pdeathsig


def _grace_seconds(env: dict[str, str]) -> float:
    """How long the agent may take to stop after a forwarded signal: longer with preemption."""
    from accel.config.core_options import PROCESS_SECTION

    if not PROCESS_SECTION["preemption"].from_env(env):
        return GRACE_SECONDS
    period = PROCESS_SECTION["preemption_grace_period"].from_env(env)
    return max(GRACE_SECONDS, period + 10)


def _preempted(records: list[dict]) -> bool:
    """Whether every worker of the last attempt that left a record exited with the preemption code."""
    if not records:
        return False
    last = max(r.get("restart", 0) for r in records)
    return all(r.get("exit_code") == PREEMPTED for r in records if r.get("restart", 0) == last)


def _wait(proc: subprocess.Popen, received: list[int], grace: float = GRACE_SECONDS) -> int:
    deadline: float | None = None
    while True:
        try:
            return proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
        if received and deadline is None:
            deadline = time.monotonic() + grace
        if deadline is not None and time.monotonic() > deadline:
            _kill_group(proc)
            return proc.wait()


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _records(error_dir: Path) -> list[dict]:
    records = []
    for path in error_dir.glob("*.json"):
        try:
            records.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return records


def program_name(command: list[str]) -> str:
    """What ``command`` runs, for messages: the module of ``python -m NAME``, else the executable."""
    if len(command) > 2 and command[1] == "-m":
        return command[2]
    return os.path.basename(command[0])


def _report(
    records: list[dict],
    code: int,
    received: list[int],
    prog: str,
    hang: str | None = None,
    program: str = "torch.distributed.run",
) -> None:
    if received:
        name = signal.Signals(received[0]).name
        sys.stderr.write(f"{prog}: stopped by {name}; every worker was asked to stop\n")
        if hang:
            sys.stderr.write(hang + "\n")
        return
    if hang:  # one block: the collective, who entered it, who never did and why
        sys.stderr.write(hang + "\n")
        return
    if not records and code == USAGE_ERROR:
        return  # the launched program refused its arguments or its cluster and said why
    if not records:
        sys.stderr.write(
            f"{prog}: the job failed ({program} exited with {code}); "
            "a worker died without a Python traceback (killed, or out of memory): "
            "see the root cause above\n"
        )
        return
    last_restart = max(r.get("restart", 0) for r in records)
    records = sorted(
        (r for r in records if r.get("restart", 0) == last_restart), key=lambda r: r["time"]
    )
    first = records[0]
    if first.get("refused"):  # the script refused to go on: its one line says why
        sys.stderr.write(f"{prog}: error: {first['refused']}\n")
        return
    ranks = ", ".join(str(r["rank"]) for r in records)
    sys.stderr.write(
        f"{prog}: worker rank {first['rank']} (local rank {first['local_rank']}, "
        f"machine {first['group_rank']}) failed first: {first['error']}"
        + (f"; failed ranks: {ranks}" if len(records) > 1 else "")
        + "\n"
    )
    lines = (first.get("traceback") or "").rstrip().splitlines()
    if lines:
        sys.stderr.write(f"{prog}: the end of rank {first['rank']}'s traceback:\n")
        sys.stderr.write("".join(f"    {line}\n" for line in lines[-TAIL_LINES:]))
