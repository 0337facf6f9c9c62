"""Elastic training on the engines, with real processes on 127.0.0.1.

torchrun: `accel launch --nnodes 1:2` on two agents (c10d rendezvous on a loopback port).
One agent and its worker are SIGKILLed mid-epoch; the survivor's agent restarts its group on
one node, which resumes the newest checkpoint (written by 2 processes) with twice the
accumulation steps; a new agent then joins, the survivor's agent restarts the group on two
nodes, and the run finishes the epoch. The samples the checkpoints cover are the epoch
exactly once, and the final weights are an uninterrupted 2-process run's, up to the order
of floating-point reductions.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

WORKER = Path(__file__).parent / "workers" / "elastic_train.py"
ACCEL = Path(sys.executable).with_name("accel")
SAMPLES = 160  # 20 optimizer steps of a global batch of 8 (4 per process)
# a dead agent leaves the rendezvous after 5 s without a heartbeat; a round waits 2 s for late nodes
RDZV_CONF = "join_timeout=120,last_call_timeout=2,keep_alive_interval=1,keep_alive_max_attempt=5"
PHASE_TIMEOUT = 180


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Agent:
    """One `accel launch` in its own session, its output in files (never a full pipe)."""

    def __init__(self, name: str, folder: Path, *args: object):
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ACCEL_", "ACCELERATE_", "PET_", "TORCHELASTIC_"))
            and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
            and k != "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"  # accel launch's own choice
        }
        env.update(
            ACCEL_CONFIG_DIR=str(folder / "cfg"),
            ACCEL_PLUGINS="ddp",
            GLOO_SOCKET_IFNAME="lo",  # the workers' group on the loopback interface only
            OMP_NUM_THREADS="1",
            PYTHONUNBUFFERED="1",
            LOGLEVEL="INFO",  # torchelastic says what its rendezvous did (shown on a failure)
        )
        self.name = name
        self.log = folder / f"{name}.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [str(ACCEL), "launch", *map(str, args)],
                env=env,
                cwd=str(folder),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the agent's whole process group: accel launch, torchrun and its worker."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)

    def wait(self, deadline: float) -> int:
        try:
            return self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f"agent {self.name} did not finish in time\n{self.text()[-6000:]}")


def wait_for(what: str, predicate, agents: list[Agent], timeout: float = PHASE_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        for agent in agents:
            if agent.proc.poll() is not None:
                pytest.fail(f"agent {agent.name} ended before {what}\n{agent.text()[-6000:]}")
        time.sleep(0.1)
    logs = "\n".join(f"--- {a.name}\n{a.text()[-4000:]}" for a in agents)
    pytest.fail(f"timed out after {timeout} s waiting for {what}\n{logs}")


def read_attempts(records: Path) -> list[dict]:
    """The worker groups in the order they ran: header fields, and each rank's records."""
    attempts: dict[str, dict] = {}
    for path in sorted(records.glob("*.jsonl")):
        lines = path.read_text().splitlines()
        entries = []
        for number, line in enumerate(lines):
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:  # only a killed worker's last line may be cut
                assert number == len(lines) - 1, (path, line)
        if not entries:
            continue
        header = entries[0]
        attempt = attempts.setdefault(header["attempt"], {**header, "ranks": {}})
        attempt["ranks"][header["rank"]] = entries[1:]
    return sorted(attempts.values(), key=lambda a: a["started"])


def steps_recorded(records: Path, world: int, since: float = 0.0) -> int:
    """The fewest step records any rank of the newest group of ``world`` processes (started
    after ``since``, a time.time()) wrote."""
    groups = [a for a in read_attempts(records) if a["world"] == world and a["started"] > since]
    if not groups or len(groups[-1]["ranks"]) < world:
        return 0
    return min(len(entries) for entries in groups[-1]["ranks"].values())


def covered_samples(attempts: list[dict]) -> tuple[list[int], list[int]]:
    """The sample ids the resumed checkpoints (and the last group) cover, and each
    contributing group's world size, in order.

    A group's record of checkpoint K counts when the next group resumed from K or later:
    what it consumed after the checkpoint the next group resumed from is consumed again.
    """
    seen: list[int] = []
    worlds: list[int] = []
    for i, attempt in enumerate(attempts):
        last = i == len(attempts) - 1
        upto = math.inf if last else attempts[i + 1]["resumed_from"]
        counted = [
            entry["ids"]
            for entries in attempt["ranks"].values()
            for entry in entries
            if (entry["checkpoint"] == "end" and last)
            or (entry["checkpoint"] != "end" and entry["checkpoint"] <= upto)
        ]
        if counted:
            worlds.append(attempt["world"])
        seen.extend(i for ids in counted for i in ids)
    return seen, worlds


@pytest.mark.timeout(600)
def test_torchrun_elastic_shrinks_and_grows_back(tmp_path):
    run, reference = tmp_path / "run", tmp_path / "reference"
    run.mkdir()
    (run / "hold").touch()  # a 1-process group waits after 2 steps, until the group grows
    agents: list[Agent] = []
    try:
        # the uninterrupted run, same global batch (2 processes x 4), alongside
        ref = Agent(
            "reference", tmp_path, "--cpu", "--num_processes", "2", WORKER, reference,
            "--samples", SAMPLES,
        )  # fmt: skip
        agents.append(ref)
        port = free_port()

        def agent(name: str, host: bool) -> Agent:
            started = Agent(
                name, tmp_path, "--cpu", "--nnodes", "1:2", "--nproc_per_node", "1",
                "--main_process_ip", "127.0.0.1", "--main_process_port", port,
                "--rdzv_conf", f"{RDZV_CONF},is_host={int(host)}",
                "--max_restarts", "3", "--monitor_interval", "0.2",
                WORKER, run, "--samples", SAMPLES, "--sleep", "0.25",
                "--hold_world", "1", "--hold_after", "2",
            )  # fmt: skip
            agents.append(started)
            return started

        # together, so that both usually make the first round (B's store client waits for A's)
        a = agent("A", host=True)  # hosts the rendezvous store: the survivor
        b = agent("B", host=False)
        records = run / "records"
        # both ranks of a 2-process group are past their third checkpoint
        wait_for("3 checkpoints on 2 processes", lambda: steps_recorded(records, 2) >= 4, [a, b])
        b.kill()  # mid-epoch: agent B and its worker, at once
        killed = time.time()
        wait_for(
            "the group to restart on 1 node", lambda: steps_recorded(records, 1, killed) >= 2, [a]
        )
        assert "checkpoint written by 2 processes, resumed on 1" in a.text(), a.text()[-6000:]
        c = agent("C", host=False)  # a node joins again: A's agent restarts the group on 2
        deadline = time.monotonic() + PHASE_TIMEOUT
        for survivor in (a, c, ref):
            code = survivor.wait(deadline)
            assert code == 0, f"agent {survivor.name} exited {code}\n{survivor.text()[-6000:]}"
    finally:
        for started in agents:
            if started.proc.poll() is None:
                started.kill()

    logs = a.text() + c.text()
    assert "checkpoint written by 1 processes, resumed on 2" in logs, logs[-6000:]
    assert "gradient accumulation steps now 2" in a.text()
    attempts = read_attempts(run / "records")
    for attempt in attempts:  # the global batch stays 8 = 4 x processes x accumulation
        assert attempt["world"] * attempt["accumulation"] == 2, attempt
    seen, worlds = covered_samples(attempts)
    assert sorted(seen) == list(range(SAMPLES)), sorted(seen)  # exactly once across resizes
    changes = [w for i, w in enumerate(worlds) if i == 0 or w != worlds[i - 1]]
    assert changes[-3:] == [2, 1, 2], worlds  # shrunk to 1 process, grew back to 2
    last = json.loads((run / "final.json").read_text())
    uninterrupted = json.loads((reference / "final.json").read_text())
    assert last["world"] == uninterrupted["world"] == 2
    for name, values in uninterrupted["weights"].items():
        assert last["weights"][name] == pytest.approx(values, abs=1e-5), name
