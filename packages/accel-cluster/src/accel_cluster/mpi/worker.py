"""What each rank started by ``mpirun`` runs first: MPI's rank variables become torch's.

``python -m accel_cluster.mpi.worker --script train.py args...`` sets ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` from the MPI launcher's
variables (Open MPI, MPICH / Intel MPI, MVAPICH), then runs the script through
core's worker entry point :mod:`accel.launchers.worker` (which reports a failing rank's
traceback to ``accel launch``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

RANK_VARIABLES = {
    "RANK": ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK"),
    "WORLD_SIZE": ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"),
    "LOCAL_RANK": ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK"),
    "LOCAL_WORLD_SIZE": (
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        "MPI_LOCALNRANKS",
        "MV2_COMM_WORLD_LOCAL_SIZE",
    ),
}
"""torch.distributed variable -> the MPI variables it is read from, in order."""


def torch_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The torch.distributed variables for the MPI rank described by ``env``.

    Raises RuntimeError when no MPI launcher variable is present (not started by mpirun).
    """
    out: dict[str, str] = {}
    for target, sources in RANK_VARIABLES.items():
        for name in sources:
            if env.get(name, "") != "":
                out[target] = env[name]
                break
    if "RANK" not in out or "WORLD_SIZE" not in out:
        raise RuntimeError(
            "accel_cluster.mpi.worker: no MPI rank variables (OMPI_COMM_WORLD_RANK, PMI_RANK, ...): "
            "it must be started by mpirun"
        )
    out.setdefault("LOCAL_RANK", out["RANK"])
    out.setdefault("LOCAL_WORLD_SIZE", out["WORLD_SIZE"])
    return out


def apply(env: MutableMapping[str, str]) -> None:
    """Set the torch.distributed variables in ``env`` (existing ``MASTER_*`` are kept)."""
    env.update(torch_variables(env))
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    env.setdefault("MASTER_PORT", "29500")


def main(argv: list[str] | None = None) -> None:
    """Translate the MPI variables, then run the script like every ``accel launch`` worker."""
    from accel.launchers import worker

    apply(os.environ)
    worker.main(argv)


if __name__ == "__main__":
    main()
