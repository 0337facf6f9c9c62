"""Entry-point module of accel-ray: the Ray launcher, ``ray_config``, flags and checkpoint hooks.

Nothing here imports Ray or torch at registration: each hook imports what it needs when
it is called, and the checkpoint hooks return at once in a process that never loaded Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.hookspecs import hookimpl

if TYPE_CHECKING:
    import argparse

    from accel.checkpoint.view import RunView
    from accel.config.options import Section
    from accel.hookspecs import Questions


@hookimpl
def accel_launchers() -> list[type]:
    """The Ray launcher (``accel launch --ray``)."""
    from .launcher import RayLauncher

    return [RayLauncher]


@hookimpl
def accel_config_sections() -> dict[str, Section]:
    """The ``ray_config`` section, declared in :data:`accel_ray.config.RAY_SECTION`."""
    from .config import RAY_SECTION

    return {RAY_SECTION.key: RAY_SECTION}


@hookimpl
def accel_launch_arguments(parser: argparse._ArgumentGroup) -> None:
    """``--ray`` and the ``--ray_*`` flags."""
    from .config import RAY_SECTION

    RAY_SECTION.add_arguments(parser)


@hookimpl
def accel_config_questions(ask: Questions, config: dict[str, object]) -> None:
    """For local multi-process jobs: whether ``accel launch`` runs them on a Ray cluster, and where."""
    if config.get("compute_environment", "LOCAL_MACHINE") != "LOCAL_MACHINE":
        return
    if config.get("mpirun_config") or config.get("slurm_config"):
        return  # another launcher already owns the job
    from .config import RAY_SECTION

    if not RAY_SECTION.ask(
        ask, "use_ray", "Will you run the job on a Ray cluster (accel launch --ray)?", default=False
    ):
        return
    address = RAY_SECTION.ask(
        ask, "ray_address", "Address of the Ray cluster (empty: $RAY_ADDRESS or a local Ray)?", ""
    )
    failures = RAY_SECTION.ask(
        ask, "ray_max_failures", "How many times may Ray restart the workers after a failure?"
    )
    config["ray_config"] = {
        "use_ray": True,
        **({"ray_address": address} if address else {}),
        "ray_max_failures": failures,
    }


@hookimpl
def accel_checkpoint_saved(run: RunView, path: str) -> None:
    """Inside a Ray Train worker with reporting on: report the checkpoint to Ray.

    ``run`` is core's :class:`accel.checkpoint.view.RunView` (process facts, step, barrier).
    """
    from .checkpoints import report_saved

    report_saved(run, path)


@hookimpl
def accel_before_resume(run: RunView, checkpoint_root: str) -> None:
    """Inside a Ray Train worker: copy in the checkpoint Ray restored after a restart."""
    from .checkpoints import restore_checkpoint

    restore_checkpoint(run, checkpoint_root)


@hookimpl
def accel_env_info() -> dict[str, str]:
    """The installed Ray version and the cluster address in ``RAY_ADDRESS``."""
    import os
    from importlib import metadata

    try:
        version = metadata.version("ray")
    except metadata.PackageNotFoundError:
        return {"Ray": "not installed (pip install accel-ray)"}
    address = os.environ.get("RAY_ADDRESS")
    return {"Ray": f"{version}" + (f" (RAY_ADDRESS={address})" if address else "")}
