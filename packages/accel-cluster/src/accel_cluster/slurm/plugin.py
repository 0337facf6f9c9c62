"""Entry-point module of accel-cluster's SLURM launcher: launcher, ``slurm_config``, flags, questions."""

from __future__ import annotations

from typing import Any

from accel.hookspecs import hookimpl


@hookimpl
def accel_launchers() -> list[type]:
    """The SLURM launcher."""
    from .launcher import SlurmLauncher

    return [SlurmLauncher]


@hookimpl
def accel_config_sections() -> dict[str, Any]:
    """The ``slurm_config`` section, declared in :data:`accel_cluster.slurm.config.SLURM_SECTION`."""
    from .config import SLURM_SECTION

    return {SLURM_SECTION.key: SLURM_SECTION}


@hookimpl
def accel_launch_arguments(parser: Any) -> None:
    """``--slurm_mode``."""
    from .config import SLURM_SECTION

    SLURM_SECTION.add_arguments(parser)


@hookimpl
def accel_config_questions(ask: Any, config: dict) -> None:
    """For distributed local jobs: whether they are started by SLURM's srun, and how."""
    if config.get("compute_environment", "LOCAL_MACHINE") != "LOCAL_MACHINE":
        return
    if config.get("distributed_type", "NO") == "NO" or config.get("mpirun_config"):
        return
    if not ask.confirm(
        "Will you start the job with SLURM's srun (rank, node rank and main address from SLURM)?",
        default=False,
        key="use_slurm",
    ):
        return
    from .config import SLURM_SECTION

    mode = SLURM_SECTION.ask(
        ask, "slurm_mode", "How are the SLURM tasks laid out?", choices=["auto", "node", "task"]
    )
    config["slurm_config"] = {"slurm_mode": mode}


@hookimpl
def accel_env_info() -> dict[str, str]:
    """This process's SLURM task, if any."""
    from .launcher import describe

    return {"SLURM": describe()}
