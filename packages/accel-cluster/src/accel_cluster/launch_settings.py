"""The resolved ``accel launch`` settings as the cluster launchers read them, typed.

Core hands a launcher the resolved settings as one mapping of heterogeneous values;
:func:`launch_settings` views it as :class:`LaunchSettings`, which names the keys these
launchers read and the type each has once resolved (core converted it through its
declaration). Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict, cast


class MpirunSettings(TypedDict, total=False):
    """The ``mpirun_config`` section (:data:`accel_cluster.mpi.config.MPIRUN_SECTION`)."""

    mpirun_hostfile: str | None
    mpirun_ccl: int | None
    mpirun_flavor: str | None
    mpirun_args: str | None


class SlurmSettings(TypedDict, total=False):
    """The ``slurm_config`` section (:data:`accel_cluster.slurm.config.SLURM_SECTION`)."""

    slurm_mode: str | None


class LaunchSettings(TypedDict, total=False):
    """The resolved settings the cluster launchers read (core's keys, SageMaker's, and the
    ``mpirun_config`` / ``slurm_config`` sections)."""

    compute_environment: str
    distributed_type: str
    num_machines: int
    num_processes: int
    nproc_per_node: int | None
    main_process_ip: str | None
    main_process_port: int | None
    module: bool
    no_python: bool
    mpirun_config: MpirunSettings | None
    slurm_config: SlurmSettings | None
    ec2_instance_type: str | None
    iam_role_name: str | None
    region: str | None
    profile: str | None
    base_job_name: str | None
    transformers_version: str | None
    pytorch_version: str | None
    py_version: str | None
    additional_args: Mapping[str, object] | None
    sagemaker_metrics_file: str | None
    sagemaker_inputs_file: str | None


def launch_settings(config: Mapping[str, object]) -> LaunchSettings:
    """``config`` (core's resolved settings) seen through :class:`LaunchSettings`."""
    return cast("LaunchSettings", config)


__all__ = ["LaunchSettings", "MpirunSettings", "SlurmSettings", "launch_settings"]
