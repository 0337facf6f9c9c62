"""A Ray cluster on this machine that talks only over loopback, for tests.

:class:`LocalRayCluster` runs ``python -m accel_ray.testing`` as a child process that
owns the cluster (``ray.cluster_utils.Cluster``: a head node, and more nodes on
request, each a raylet of its own). Every node's IP is 127.0.0.1: with
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` Ray keeps the loopback address instead of
replacing it with this machine's network address, so its GCS, raylets, object managers,
runtime-env agents and workers listen on 127.0.0.1 only and Ray Train's rendezvous
(``MASTER_ADDR``) is 127.0.0.1. The dashboard and usage statistics are off. Processes
that connect to the cluster (drivers) need :meth:`LocalRayCluster.environment`.

The child reads commands on its stdin (``add CPUS [RESOURCES-JSON]``, ``remove``, ``quit``)
and shuts the cluster down on ``quit``, on end of input (its parent died) or on SIGTERM.
``remove`` kills the newest added node and its processes (a lost machine: the Ray workers
on it die with it).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import TypedDict

LOOPBACK = "127.0.0.1"
ENVIRONMENT = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # keep 127.0.0.1 as the node address
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",  # workers run this interpreter, not `uv run`
    "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",
}
"""Variables every process of (or connecting to) the test cluster gets."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


class LocalRayCluster:
    """A loopback-only Ray cluster owned by a child process (see the module docstring)."""

    def __init__(self, num_cpus: int = 2, resources: dict[str, float] | None = None):
        self.num_cpus = num_cpus
        self.resources = dict(resources or {})
        self.temp_dir = tempfile.mkdtemp(prefix="accel-ray-")
        self.address = ""
        self.nodes = 0
        self._proc: subprocess.Popen | None = None

    def ray_processes(self) -> dict[int, str]:
        """``{pid: title}`` of the Ray actors and tasks now running on this cluster's nodes
        (``ray::TrainController``, ``ray::RayTrainWorker``, ...; idle workers left out)."""
        if self._proc is None:
            return {}
        children: dict[int, list[int]] = {}
        titles: dict[int, str] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                    parent = int(handle.read().rpartition(")")[2].split()[1])
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    titles[int(entry)] = handle.read().replace(b"\0", b" ").decode().strip()
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
        found, stack = {}, [self._proc.pid]
        while stack:
            pid = stack.pop()
            stack.extend(children.get(pid, []))
            title = titles.get(pid, "")
            if title.startswith("ray::") and not title.startswith(
                ("ray::IDLE", "ray::DashboardAgent", "ray::RuntimeEnvAgent")
            ):
                found[pid] = title
        return found

    def environment(self) -> dict[str, str]:
        """``os.environ`` plus what a driver of this cluster needs (``RAY_ADDRESS``, ...)."""
        return {**os.environ, **ENVIRONMENT, "RAY_ADDRESS": self.address}

    def start(self, timeout: float = 120) -> LocalRayCluster:
        """Start the head node; returns once it accepts drivers."""
        command = [
            sys.executable,
            "-m",
            "accel_ray.testing",
            "--port",
            str(free_port()),
            "--num-cpus",
            str(self.num_cpus),
            "--resources",
            json.dumps(self.resources),
            "--temp-dir",
            self.temp_dir,
        ]
        self._proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # Ray records the head's address in $RAY_TMPDIR/ray/ray_current_cluster (/tmp/ray
            # by default, shared with any other Ray on this machine): keep it in ours
            env={**os.environ, **ENVIRONMENT, "RAY_TMPDIR": self.temp_dir},
            text=True,
        )
        self.address = self._answer("ready", timeout)
        self.nodes = 1
        return self

    def add_node(
        self, num_cpus: int = 1, resources: dict[str, float] | None = None, timeout: float = 120
    ) -> None:
        """Start one more node (a raylet of its own on 127.0.0.1) and wait until it joined."""
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(f"add {num_cpus} {json.dumps(resources or {})}\n")
        self._proc.stdin.flush()
        self._answer("added", timeout)
        self.nodes += 1

    def remove_node(self, timeout: float = 120) -> None:
        """Kill the newest added node (its raylet and every Ray worker on it), as a lost machine,
        and wait until the cluster counts it dead."""
        assert self._proc is not None and self._proc.stdin is not None
        if self.nodes < 2:
            raise RuntimeError("the local Ray cluster has no added node to remove")
        self._proc.stdin.write("remove\n")
        self._proc.stdin.flush()
        self._answer("removed", timeout)
        self.nodes -= 1

    def _answer(self, word: str, timeout: float) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self._proc.stdout], [], [], 1.0)
            if not ready:
                if self._proc.poll() is not None:
                    break
                continue
            line = self._proc.stdout.readline()
            if not line:
                break
            if line.startswith(word):
                return line.split(maxsplit=1)[1].strip() if " " in line.strip() else ""
        self.stop()
        raise RuntimeError(f"the local Ray cluster did not answer {word!r} in {timeout:.0f} s")

    def stop(self) -> None:
        """Shut every node down (the child kills the Ray processes it started)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.write("quit\n")
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(self.temp_dir, ignore_errors=True)  # the nodes' sessions and logs

    def __enter__(self) -> LocalRayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_SHARED: list[LocalRayCluster] = []
NODE_RESOURCE = "accel_test_node"
"""A custom resource every node of :func:`shared_cluster` has once: asking one per worker
(``--ray_resources_per_worker CPU=1,accel_test_node=1``) puts each worker on its own node."""


def shared_cluster(num_cpus: int = 4) -> LocalRayCluster:
    """One :class:`LocalRayCluster` per process (a head of ``num_cpus`` logical CPUs), started on
    first use and stopped when the process exits; test suites' fixtures share it."""
    if not _SHARED:
        import atexit

        cluster = LocalRayCluster(num_cpus=num_cpus, resources={NODE_RESOURCE: 1}).start()
        atexit.register(cluster.stop)
        _SHARED.append(cluster)
    return _SHARED[0]


class _NodeArguments(TypedDict):
    """What every node of the test cluster starts with."""

    node_ip_address: str
    include_dashboard: bool


def _serve(port: int, num_cpus: int, resources: dict[str, float], temp_dir: str) -> None:
    """The child: start the head, then serve ``add`` / ``quit`` until told to stop."""
    from ray.cluster_utils import Cluster

    os.makedirs(os.path.join(temp_dir, "ray"), exist_ok=True)  # Ray does not create it
    common = _NodeArguments(node_ip_address=LOOPBACK, include_dashboard=False)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            **common,
            "gcs_server_port": port,
            "num_cpus": num_cpus,
            "resources": resources,
            "temp_dir": temp_dir,
        },
    )
    stopping, added = [], []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    try:
        print(f"ready {cluster.address}", flush=True)
        while not stopping:
            ready, _, _ = select.select([sys.stdin], [], [], 1.0)
            if not ready:
                continue
            line = sys.stdin.readline()
            if not line or line.strip() == "quit":
                break
            verb, _, rest = line.strip().partition(" ")
            if verb == "add":
                cpus, _, extra = rest.partition(" ")
                added.append(
                    cluster.add_node(
                        **common, num_cpus=int(cpus), resources=json.loads(extra or "{}")
                    )
                )
                cluster.wait_for_nodes()
                print("added", flush=True)
            elif verb == "remove" and added:
                cluster.remove_node(added.pop(), allow_graceful=False)
                cluster.wait_for_nodes()
                print("removed", flush=True)
    finally:
        cluster.shutdown()


def main(argv: list[str] | None = None) -> None:
    """``python -m accel_ray.testing --port P --num-cpus N --resources JSON --temp-dir DIR``."""
    import argparse

    parser = argparse.ArgumentParser(description="a loopback-only Ray cluster for tests")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--resources", default="{}")
    parser.add_argument("--temp-dir", required=True)
    args = parser.parse_args(argv)
    _serve(args.port, args.num_cpus, json.loads(args.resources), args.temp_dir)


__all__ = [
    "ENVIRONMENT",
    "LOOPBACK",
    "LocalRayCluster",
    "NODE_RESOURCE",
    "free_port",
    "shared_cluster",
]

if __name__ == "__main__":
    main()
