"""Start Open MPI's ``mpirun`` forwarding the launch environment to every host.

Open MPI passes a variable to remote ranks only when named with ``-x``. The
``ACCEL_*`` variables are known once ``accel launch`` has resolved the settings,
so ``python -m accel_cluster.mpi.forward mpirun ARGS...`` adds ``-x NAME`` for each
of them (and the ``MASTER_*``, thread and device variables) and replaces itself
with ``mpirun``. (MPICH's ``-genvall`` forwards everything by itself.)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

FORWARDED = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMP_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
    "CCL_WORKER_COUNT",
    "PYTHONPATH",
)
"""Variables forwarded besides every ``ACCEL_*`` one."""


def forward_arguments(env: Mapping[str, str]) -> list[str]:
    """``-x NAME`` for every variable of ``env`` the ranks need, sorted."""
    names = sorted(n for n in env if n.startswith("ACCEL_") or n in FORWARDED)
    return [arg for name in names for arg in ("-x", name)]


def main(argv: list[str] | None = None) -> None:
    """Exec ``argv`` (``mpirun ...``) with the forwarding arguments after the program name."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        sys.stderr.write("usage: python -m accel_cluster.mpi.forward mpirun [ARGS...]\n")
        raise SystemExit(2)
    command = [argv[0], *forward_arguments(os.environ), *argv[1:]]
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"accel launch: cannot run {command[0]}: {exc.strerror}\n")
        raise SystemExit(127) from None


if __name__ == "__main__":
    main()
