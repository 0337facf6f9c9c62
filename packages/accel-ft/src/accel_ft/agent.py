"""``python -m accel_ft.agent TORCHRUN_ARGS``: one replica group's torchrun, its stores on loopback.

A replica group is one machine's ``torch.distributed.run --standalone``. Its agent hosts two
``TCPStore`` servers: the rendezvous store and the store its workers bootstrap from (and
torchft's Manager reads). torch's ``TCPStore`` listens on every interface and has no
bind-address argument; it only accepts an already listening socket (``master_listen_fd``).
Both stores serve processes of this machine only (``--standalone``), so this agent opens
that socket on 127.0.0.1 for every store server it creates, then runs torchrun unchanged.
"""

from __future__ import annotations

import logging
import socket
import sys
from typing import Any

LOOPBACK = "127.0.0.1"


def loopback_listener(port: int) -> tuple[int, int]:
    """(file descriptor, port) of a TCP socket listening on ``127.0.0.1:port`` (0: any free port).

    The descriptor is handed over: the store given it owns it.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    return sock.detach(), bound


def pin_store_servers_to_loopback() -> None:
    """Make every ``TCPStore`` server this process creates listen on 127.0.0.1 only."""
    import torch.distributed as dist
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend

    class LoopbackTCPStore(dist.TCPStore):
        """A ``TCPStore`` whose server (``is_master``) listens on 127.0.0.1 only."""

        def __init__(self, host_name: str, port: int, *args: Any, **kwargs: Any):
            names = ("world_size", "is_master", "timeout", "wait_for_workers")
            fields = {**dict(zip(names, args, strict=False)), **kwargs}
            if fields.get("is_master") and fields.get("master_listen_fd") is None:
                fields["master_listen_fd"], port = loopback_listener(port)
                host_name = LOOPBACK
            super().__init__(host_name, port, **fields)

    # the names torchrun's rendezvous code looks the class up by; ty reads the stub's class
    # object, and a subclass in its place is what is meant
    dist.TCPStore = LoopbackTCPStore  # ty: ignore[invalid-assignment]
    c10d_rendezvous_backend.TCPStore = LoopbackTCPStore  # ty: ignore[invalid-assignment]


def main() -> None:
    """Run torchrun (``torch.distributed.run``) with ``sys.argv[1:]``, stores on loopback.

    Stopped by a signal (the supervisor ending the run), it exits ``128 + signal`` without
    torch's traceback and shutdown warnings: the supervisor says in one line why it stopped.
    """
    pin_store_servers_to_loopback()
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing.api import SignalException

    for name in ("agent.server.api", "multiprocessing.api"):
        logging.getLogger(f"torch.distributed.elastic.{name}").setLevel(logging.ERROR)
    args = sys.argv[1:]
    sys.argv = [str(run.__file__), *args]
    try:
        run.main(args)
    except SignalException as exc:
        raise SystemExit(128 + int(exc.sigval)) from None


if __name__ == "__main__":
    main()
