"""Entry-point module of accel-cluster's MPI launcher: launcher, ``mpirun_config``, flags, questions."""

from __future__ import annotations

from typing import Any

from accel.hookspecs import hookimpl


@hookimpl
def accel_launchers() -> list[type]:
    """The ``mpirun`` launcher."""
    from .launcher import MpiLauncher

    return [MpiLauncher]


@hookimpl
def accel_config_sections() -> dict[str, Any]:
    """The ``mpirun_config`` section and its validator."""
    from .config import validate_section

    return {"mpirun_config": validate_section}


@hookimpl
def accel_launch_arguments(parser: Any) -> None:
    """``--mpirun_hostfile``, ``--mpirun_ccl``, ``--mpirun_flavor`` and ``--mpirun_args``."""
    parser.add_argument(
        "--mpirun_hostfile",
        metavar="PATH",
        help="run a MULTI_CPU job under mpirun on the hosts of this MPI host file",
    )
    parser.add_argument(
        "--mpirun_ccl", metavar="N", help="oneCCL worker threads per rank (CCL_WORKER_COUNT)"
    )
    parser.add_argument(
        "--mpirun_flavor",
        metavar="{auto,openmpi,mpich}",
        help="mpirun argument style (default: from `mpirun --version`)",
    )
    parser.add_argument(
        "--mpirun_args",
        metavar="ARGS",
        help="extra mpirun arguments, e.g. --mpirun_args=--oversubscribe",
    )


@hookimpl
def accel_config_questions(ask: Any, config: dict) -> None:
    """For multi-CPU jobs: whether to run under mpirun, and with which host file."""
    if config.get("distributed_type") != "MULTI_CPU" or config.get("slurm_config"):
        return
    if config.get("compute_environment", "LOCAL_MACHINE") != "LOCAL_MACHINE":
        return
    if not ask.confirm(
        "Do you want to launch with mpirun (Open MPI, MPICH or Intel MPI) on the hosts of a host file?",
        default=False,
        key="use_mpirun",
    ):
        return
    hostfile = ask.text(
        "Path of the MPI host file (one `host slots=N` or `host:N` per line)?",
        "hostfile",
        key="mpirun_config.mpirun_hostfile",
        validate=lambda answer: None if answer.strip() else "enter a path",
    ).strip()
    ccl = ask.integer(
        "How many oneCCL worker threads per rank?", 1, key="mpirun_config.mpirun_ccl", minimum=1
    )
    config["mpirun_config"] = {"mpirun_hostfile": hostfile, "mpirun_ccl": ccl}


@hookimpl
def accel_env_info() -> dict[str, str]:
    """The MPI launcher found on PATH and its flavor."""
    import shutil

    program = shutil.which("mpirun") or shutil.which("mpiexec")
    if not program:
        return {"MPI launcher": "no mpirun/mpiexec on PATH"}
    from .launcher import detect_flavor

    try:
        return {"MPI launcher": f"{program} ({detect_flavor(program)} style)"}
    except Exception as exc:  # accel env must not fail on a broken MPI install
        return {"MPI launcher": f"{program} (unusable: {exc})"}
