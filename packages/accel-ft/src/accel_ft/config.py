"""The ``ft_config`` section, declared once: validation, the ``--ft*`` flags and their reader.

Torch-free and torchft-free: ``accel launch --help`` and a bad value import neither.
The supervisor gives each replica group its own copy of the section in
``ACCEL_LAUNCH_CONFIG`` with ``ft_replica_group`` and ``ft_lighthouse`` filled in; a worker
reads it with ``FT_SECTION.read()``.
"""

from __future__ import annotations

from typing import Any

from accel.config.options import Option, Section
from accel.errors import ConfigError


def read_address(value: Any, label: str) -> str:
    """A lighthouse address ``host:port`` or ``http://host:port``, returned as ``http://host:port``."""
    text = str(value).strip()
    rest = text.split("://", 1)[1] if "://" in text else text
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(
            f"{label}={value!r}: give the lighthouse as HOST:PORT (e.g. 10.0.0.1:29510)"
        )
    return f"http://{host}:{int(port)}"


def read_bind(value: Any, label: str) -> str:
    """Where a started lighthouse listens: ``HOST:PORT`` (port 0: any free port)."""
    text = str(value).strip()
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{label}={value!r}: give HOST:PORT (e.g. 127.0.0.1:0 or 0.0.0.0:29510)")
    return f"{host}:{int(port)}"


FT_SECTION = Section(
    "ft_config",
    [
        Option(
            "use_ft",
            bool,
            default=False,
            flag="ft",
            store_true=True,
            help="fault-tolerant data parallelism on torchft: replica groups that keep training "
            "when one fails and heal it from a live peer",
        ),
        Option(
            "ft_replica_groups",
            int,
            default=2,
            minimum=1,
            help="replica groups this machine runs, each its own torchrun group",
            metavar="R",
        ),
        Option(
            "ft_batch_groups",
            int,
            minimum=1,
            help="replica groups whose batches make one global batch (default: "
            "--ft_replica_groups); a step with fewer groups gives each a larger share, so the "
            "global batch and the loss curve stay those of a run without failures",
            metavar="N",
        ),
        Option(
            "ft_group_size",
            int,
            default=1,
            minimum=1,
            help="processes of each replica group",
            metavar="P",
        ),
        Option(
            "ft_first_group",
            int,
            default=0,
            minimum=0,
            help="number of this machine's first replica group (several machines against one "
            "lighthouse: machine 2 of 2 groups each gives 2)",
            metavar="N",
        ),
        Option(
            "ft_lighthouse",
            "any",
            reader=read_address,
            help="address of a running lighthouse to join (HOST:PORT); default: start one",
            allowed="HOST:PORT",
            metavar="HOST:PORT",
        ),
        Option(
            "ft_lighthouse_bind",
            "any",
            reader=read_bind,
            default="127.0.0.1:0",
            help="where the lighthouse this launch starts listens (0.0.0.0:29510 for other "
            "machines)",
            allowed="HOST:PORT",
            metavar="HOST:PORT",
        ),
        Option(
            "ft_min_replicas",
            int,
            default=1,
            minimum=1,
            help="fewest replica groups a step may commit with",
            metavar="N",
        ),
        Option(
            "ft_quorum_timeout",
            float,
            default=60.0,
            minimum=0.1,
            help="seconds a step waits for a quorum of --ft_min_replicas groups before the run "
            "stops",
            metavar="SECONDS",
        ),
        Option(
            "ft_timeout",
            float,
            default=10.0,
            minimum=0.1,
            help="seconds a collective or a live copy may take before the step is abandoned",
            metavar="SECONDS",
        ),
        Option(
            "ft_heartbeat_timeout",
            float,
            default=2.0,
            minimum=0.1,
            help="seconds without a heartbeat after which the lighthouse drops a group",
            metavar="SECONDS",
        ),
        Option(
            "ft_max_restarts",
            int,
            default=100,
            minimum=0,
            help="how many times each replica group is restarted after a failure",
            metavar="N",
        ),
        Option(
            "ft_failed_step",
            choices=("retrain", "skip"),
            default="retrain",
            help="samples of a step that did not commit: retrain them in the next step "
            "(each sample once per epoch), or skip them and record their ids",
        ),
        Option(
            "ft_replica_group",
            int,
            minimum=0,
            flag=None,
            in_file=False,
            help="this process's replica group (set by the supervisor)",
        ),
        Option(
            "ft_run_dir",
            flag=None,
            in_file=False,
            help="folder the supervisor and its groups share (set by the supervisor)",
        ),
    ],
    title="accel-ft",
)
"""The ``ft_config`` section: ``--ft`` and the ``--ft_*`` flags of ``accel launch``."""

validate_section = FT_SECTION.validate
"""Problems of an ``ft_config`` mapping (empty when it is valid)."""

__all__ = ["FT_SECTION", "read_address", "read_bind", "validate_section"]
