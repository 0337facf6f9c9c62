"""``python -m accel_ft.supervisor --script train.py args``: what ``accel launch --ft`` runs.

It starts torchft's lighthouse (or joins ``ft_lighthouse``), then one
``torch.distributed.run`` per replica group of this machine, each with its own rendezvous
on localhost (``--standalone``) and ``--max_restarts ft_max_restarts``: a group that fails is restarted by its
own torchrun and heals from a live peer; the other groups never stop. Each group's workers
get the launch's settings (``ACCEL_LAUNCH_CONFIG``) with their ``ft_config`` completed:
``ft_replica_group``, ``ft_lighthouse`` and ``ft_run_dir``, the folder where a group that
lost its quorum leaves its one line (the supervisor then stops every group) and where the
supervisor marks the run finished once a group's torchrun exited 0 (a group restarted
after that exits at once instead of training alone).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from accel import env_vars as accel_environment
from accel.config.launched import launched_config
from accel.launchers.local import TorchrunLauncher

from .config import FT_SECTION
from .session import DONE_FILE, STOP_FILE

JOIN_TIMEOUT_MS = 1000
"""How long the lighthouse waits for a heartbeating group that has not asked to join yet."""
FINISH_GRACE_S = 120.0
"""After a group finished the script, how long the others may take to finish theirs."""


def start_lighthouse(bind: str, min_replicas: int, heartbeat_timeout: float) -> tuple[Any, str]:
    """torchft's lighthouse listening on ``bind``; returns it and the address groups join."""
    from torchft._torchft import LighthouseServer

    server = LighthouseServer(
        bind=bind,
        min_replicas=min_replicas,
        join_timeout_ms=JOIN_TIMEOUT_MS,
        heartbeat_timeout_ms=int(heartbeat_timeout * 1000),
    )
    port = server.address().rpartition(":")[2]
    host = bind.rpartition(":")[0]
    if host in ("0.0.0.0", "[::]", "::"):
        host = socket.gethostname()
    return server, f"http://{host}:{port}"


def die_with_parent() -> None:
    """Ask Linux to SIGTERM this process when its parent dies (no group outlives the launch)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def group_command(config: dict[str, Any], script: list[str]) -> list[str]:
    """The torchrun argv of one replica group: its own rendezvous, its own restarts.

    ``--standalone``: torchrun binds its rendezvous to a free port itself, so no port is
    chosen here and then lost to another process before torchrun binds it. It runs through
    :mod:`accel_ft.agent`, which keeps the group's stores on 127.0.0.1.
    """
    settings = FT_SECTION.read(config.get("ft_config") or {})
    group = {
        **config,
        "num_processes": settings["ft_group_size"],
        "nproc_per_node": settings["ft_group_size"],
        "num_machines": 1,
        "max_num_machines": None,
        "machine_rank": 0,
        "main_process_ip": None,
        "main_process_port": None,
        "rdzv_backend": "static",
        "max_restarts": settings["ft_max_restarts"],
    }
    command = TorchrunLauncher().command(group, script)
    # the group's torchrun, its rendezvous stores on loopback (accel_ft.agent)
    at = command.index("torch.distributed.run")
    return [*command[:at], "accel_ft.agent", *command[at + 1 :]]


def group_environment(config: dict[str, Any], section: dict[str, Any]) -> dict[str, str]:
    """This process's environment with the group's completed settings in ``ACCEL_LAUNCH_CONFIG``."""
    env = dict(os.environ)
    text = json.dumps({**config, "ft_config": section}, sort_keys=True, default=str)
    name = accel_environment.LAUNCH_CONFIG
    env[name] = text
    alias = accel_environment.accelerate_name(name)
    if alias and alias in env:
        env[alias] = text
    lighthouse_host = str(section.get("ft_lighthouse", "")).split("://")[-1].rpartition(":")[0]
    if lighthouse_host in ("127.0.0.1", "localhost"):
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # one machine: gloo stays on loopback
    env.setdefault("RUST_LOG", "warn")  # torchft's Rust side logs every quorum at INFO
    return env


def supervise(script: list[str]) -> int:
    """Start the lighthouse and the groups; return the run's exit status."""
    os.environ.setdefault("RUST_LOG", "warn")  # before torchft's lighthouse starts logging
    config = launched_config()
    settings = FT_SECTION.read(config.get("ft_config") or {})
    run_dir = Path(tempfile.mkdtemp(prefix="accel-ft-"))
    server = None
    address = settings.get("ft_lighthouse")
    if not address:
        server, address = start_lighthouse(
            settings["ft_lighthouse_bind"],
            settings["ft_min_replicas"],
            settings["ft_heartbeat_timeout"],
        )
    groups = range(
        settings["ft_first_group"], settings["ft_first_group"] + settings["ft_replica_groups"]
    )
    print(
        f"accel-ft: lighthouse {address}{' (started here)' if server else ''}; replica groups "
        f"{groups.start}-{groups.stop - 1} of {settings['ft_group_size']} processes each",
        file=sys.stderr,
        flush=True,
    )
    raw = dict(config.get("ft_config") or {})
    children: dict[int, subprocess.Popen] = {}
    try:
        for group in groups:
            section = {
                **raw,
                "ft_replica_group": group,
                "ft_lighthouse": address,
                "ft_run_dir": str(run_dir),
            }
            children[group] = subprocess.Popen(
                group_command(config, script),
                env=group_environment(config, section),
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        return _wait(children, run_dir)
    finally:
        for child in children.values():
            _terminate(child)
        if server is not None:
            server.shutdown()
        shutil.rmtree(run_dir, ignore_errors=True)


def _wait(children: dict[int, subprocess.Popen], run_dir: Path) -> int:
    """Until every group ended, a group stopped the run, or the finished run's grace ran out."""
    finished_at = None
    while True:
        stop = run_dir / STOP_FILE
        if stop.exists():
            for child in children.values():
                _terminate(child)  # first, so that the reason is the run's last line
            print(stop.read_text().strip(), file=sys.stderr, flush=True)
            return 1
        codes = {g: c.poll() for g, c in children.items()}
        if 0 in codes.values() and not (run_dir / DONE_FILE).exists():
            (run_dir / DONE_FILE).write_text("")  # a group finished the script: the run is done
        if all(code is not None for code in codes.values()):
            failed = {g: code for g, code in codes.items() if code}
            if failed and not (run_dir / DONE_FILE).exists():
                print(
                    "accel-ft: replica groups failed for good (restarts used up): "
                    + ", ".join(f"group {g} exit {c}" for g, c in sorted(failed.items())),
                    file=sys.stderr,
                    flush=True,
                )
                return 1
            return 0
        if (run_dir / DONE_FILE).exists():
            finished_at = finished_at or time.monotonic()
            if time.monotonic() - finished_at > FINISH_GRACE_S:
                return 0
        time.sleep(0.2)


def _terminate(child: subprocess.Popen) -> None:
    """SIGTERM a group's torchrun (and its workers), SIGKILL after 10 s."""
    if child.poll() is not None:
        return
    try:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.wait()


def main(argv: list[str] | None = None) -> int:
    """Run ``--script path args`` (or ``--module name args``) as the supervisor."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] not in ("--script", "--module"):
        print("usage: python -m accel_ft.supervisor --script PATH [ARGS...]", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    die_with_parent()
    return supervise(args[1:])


if __name__ == "__main__":
    sys.exit(main())
