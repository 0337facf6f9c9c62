"""accel-cluster: launcher plugins for clusters and clouds.

* :mod:`accel_cluster.mpi` — ``mpirun`` (Open MPI, MPICH, Intel MPI) with a host file;
* :mod:`accel_cluster.slurm` — one ``srun accel launch`` for every node of an allocation;
* :mod:`accel_cluster.sagemaker` — the config file becomes an Amazon SageMaker training job.

Each registers through the ``accel`` entry-point group; importing this package imports
neither torch nor the SageMaker SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports, installed_version

if TYPE_CHECKING:
    __version__: str

__getattr__, __dir__ = exports(
    __name__, {}, computed={"__version__": installed_version("accel-cluster")}
)
