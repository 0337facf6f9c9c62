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
    """The ``mpirun_config`` section, declared in :data:`accel_cluster.mpi.config.MPIRUN_SECTION`."""
    from .config import MPIRUN_SECTION

    return {MPIRUN_SECTION.key: MPIRUN_SECTION}


@hookimpl
def accel_launch_arguments(parser: Any) -> None:
    """``--mpirun_hostfile``, ``--mpirun_ccl``, ``--mpirun_flavor`` and ``--mpirun_args``."""
    from .config import MPIRUN_SECTION

    MPIRUN_SECTION.add_arguments(parser)


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
    from .config import MPIRUN_SECTION as S

    hostfile = ask.text(  # not S.ask: an empty path is refused here
        "Path of the MPI host file (one `host slots=N` or `host:N` per line)?",
        "hostfile",
        key="mpirun_config.mpirun_hostfile",
        validate=lambda answer: None if answer.strip() else "enter a path",
    ).strip()
    ccl = S.ask(ask, "mpirun_ccl", "How many oneCCL worker threads per rank?", default=1)
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
