"""``notebook_launcher`` and ``debug_launcher``: start several processes from a notebook or a test.

Both run ``function`` in forked worker processes through torchelastic's
``elastic_launch`` (rendezvous, restarts, failure propagation) — the same agent
``accel launch`` uses — with the settings passed as ``ACCEL_*`` variables.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

from accel import env_vars

if TYPE_CHECKING:
    from .base import Launcher


@contextlib.contextmanager
def patch_environment(**kwargs: object) -> Generator[None, None, None]:
    """Set environment variables (names upper-cased) for the block, then restore the previous values."""
    saved: dict[str, str | None] = {}
    for key, value in kwargs.items():
        name = key.upper()
        saved[name] = os.environ.get(name)
        os.environ[name] = str(value)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _fresh_state(function: Callable) -> Callable:
    """``function`` run in a worker after forgetting any state inherited from the parent by fork."""

    @functools.wraps(function)
    def worker(*args: object) -> object:
        from accel.state import GradientState, PartialState

        PartialState._reset_state()
        GradientState._reset_state()
        return function(*args)

    return worker


def notebook_launcher(
    function: Callable,
    args: tuple = (),
    num_processes: int | None = None,
    mixed_precision: str = "no",
    use_port: str | int = "29500",
    master_addr: str = "127.0.0.1",
    node_rank: int = 0,
    num_nodes: int = 1,
    rdzv_backend: str = "static",
    rdzv_endpoint: str = "",
    rdzv_conf: dict[str, object] | None = None,
    rdzv_id: str = "none",
    max_restarts: int = 0,
    monitor_interval: float = 0.1,
    log_line_prefix_template: str | None = None,
) -> object:
    """Run ``function(*args)`` on ``num_processes`` processes per node (forked; CPU uses gloo).

    With one process (and one node) the function simply runs here. Returns the
    per-rank results of the local processes as a dict ``{rank: result}`` when several.
    """
    import torch

    from accel.state import PartialState

    plugin_launcher = _notebook_plugin_launcher()
    if plugin_launcher is not None:
        return plugin_launcher.notebook_launch(
            function, args, num_processes, str(mixed_precision).lower()
        )
    if num_processes is None:
        num_processes = torch.cuda.device_count() if torch.cuda.is_available() else 1
    if num_processes < 1 or num_nodes < 1:
        raise ValueError(
            f"notebook_launcher needs num_processes >= 1 and num_nodes >= 1 (got {num_processes}, {num_nodes})"
        )
    precision = str(mixed_precision).lower()
    if num_processes == 1 and num_nodes == 1:
        with patch_environment(**{env_vars.MIXED_PRECISION: precision}):
            return function(*args)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        raise RuntimeError(
            "CUDA was initialised in this process before notebook_launcher: worker processes cannot be forked. "
            "Restart the notebook and do not touch CUDA (or create an Accelerator) before launching"
        )
    if PartialState._shared_state and PartialState._shared_state.get("num_processes", 1) > 1:
        raise RuntimeError(
            "notebook_launcher was called from inside a distributed run; call it from the main notebook process"
        )
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    port = int(use_port) if int(use_port) != 0 else _free_port()
    endpoint = rdzv_endpoint or f"{master_addr}:{port}"
    config = LaunchConfig(
        min_nodes=num_nodes,
        max_nodes=num_nodes,
        nproc_per_node=num_processes,
        run_id=rdzv_id,
        rdzv_endpoint=endpoint,
        rdzv_backend=rdzv_backend,
        rdzv_configs={"rank": node_rank, **(rdzv_conf or {})},
        max_restarts=max_restarts,
        monitor_interval=monitor_interval,
        start_method="fork",
        log_line_prefix_template=log_line_prefix_template,
    )
    with patch_environment(
        **{env_vars.MIXED_PRECISION: precision, "MASTER_ADDR": master_addr, "MASTER_PORT": port}
    ):
        return elastic_launch(config=config, entrypoint=_fresh_state(function))(*args)


def _notebook_plugin_launcher() -> Launcher | None:
    """The launcher plugin claiming notebook launches in this environment (accel-tpu on XLA), if any."""
    from accel.plugins import registry

    for cls in sorted(registry.launchers().values(), key=lambda c: -getattr(c, "priority", 0)):
        launcher = cls()
        if getattr(launcher, "claims_notebook", lambda: False)():
            return launcher
    return None


def debug_launcher(function: Callable, args: tuple = (), num_processes: int = 2) -> object:
    """Run ``function(*args)`` on ``num_processes`` CPU processes, for debugging and tests."""
    with patch_environment(**{env_vars.USE_CPU: "1"}):
        return notebook_launcher(function, args=args, num_processes=num_processes, use_port=0)
