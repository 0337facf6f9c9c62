"""accel-cluster: launcher plugins for clusters and clouds.

* :mod:`accel_cluster.mpi` — ``mpirun`` (Open MPI, MPICH, Intel MPI) with a host file;
* :mod:`accel_cluster.slurm` — one ``srun accel launch`` for every node of an allocation;
* :mod:`accel_cluster.sagemaker` — the config file becomes an Amazon SageMaker training job.

Each registers through the ``accel`` entry-point group; importing this package imports
neither torch nor the SageMaker SDK.
"""


def __getattr__(name: str) -> str:
    """``__version__``: the installed distribution's version (read on first use)."""
    if name != "__version__":
        raise AttributeError(f"module 'accel_cluster' has no attribute {name!r}")
    from accel.imports import installed_version

    value = globals()["__version__"] = installed_version("accel-cluster")
    return value
