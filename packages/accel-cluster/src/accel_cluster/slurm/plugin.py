"""Entry-point module of accel-cluster's SLURM launcher: launcher, ``slurm_config``, flags, questions."""

from __future__ import annotations

from typing import Any

from accel.hookspecs import hookimpl


def validate_section(section: dict[str, Any]) -> list[str]:
    """Problems of a ``slurm_config`` mapping (empty when it is valid)."""
    from .launcher import MODES

    problems = []
    for key, value in section.items():
        if key != "slurm_mode":
            problems.append(f"unknown key {key!r}; allowed: slurm_mode")
        elif value is not None and str(value).lower() not in MODES:
            problems.append(f"slurm_mode: {value!r} is not allowed; use one of {', '.join(MODES)}")
    return problems


@hookimpl
def accel_launchers() -> list[type]:
    """The SLURM launcher."""
    from .launcher import SlurmLauncher

    return [SlurmLauncher]


@hookimpl
def accel_config_sections() -> dict[str, Any]:
    """The ``slurm_config`` section and its validator."""
    return {"slurm_config": validate_section}


@hookimpl
def accel_launch_arguments(parser: Any) -> None:
    """``--slurm_mode``."""
    parser.add_argument(
        "--slurm_mode",
        metavar="{auto,node,task,off}",
        help="inside srun: one task per node running torchrun (node), one task per process "
        "(task), by the task count (auto, the default) or never (off)",
    )


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
    mode = ask.select(
        "How are the SLURM tasks laid out?",
        ["auto", "node", "task"],
        default="auto",
        key="slurm_config.slurm_mode",
    )
    config["slurm_config"] = {"slurm_mode": mode}


@hookimpl
def accel_env_info() -> dict[str, str]:
    """This process's SLURM task, if any."""
    from .launcher import describe

    return {"SLURM": describe()}
