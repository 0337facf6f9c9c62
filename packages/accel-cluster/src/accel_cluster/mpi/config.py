"""The ``mpirun_config`` section (Accelerate's keys plus two of accel's), declared once.

:data:`MPIRUN_SECTION` validates the section of a config file, makes the ``accel launch
--mpirun_*`` flags and reads the section back (:meth:`~accel.config.options.Section.read`).
"""

from __future__ import annotations

from accel.config.options import Option, Section

FLAVORS = ("auto", "openmpi", "mpich")
"""Values of ``mpirun_config.mpirun_flavor`` (``mpich`` also covers Intel MPI and MVAPICH)."""

MPIRUN_SECTION = Section(
    "mpirun_config",
    [
        Option(
            "mpirun_hostfile",
            help="run a MULTI_CPU job under mpirun on the hosts of this MPI host file "
            "(one `host slots=N` or `host:N` per line)",
            metavar="PATH",
        ),
        Option(
            "mpirun_ccl",
            int,
            minimum=1,
            help="oneCCL worker threads per rank (CCL_WORKER_COUNT)",
            metavar="N",
        ),
        Option(
            "mpirun_flavor",
            choices=FLAVORS,
            help="mpirun argument style: auto (from `mpirun --version`), openmpi or mpich",
            metavar="{auto,openmpi,mpich}",
        ),
        Option(
            "mpirun_args",
            help="extra mpirun arguments, e.g. --mpirun_args=--oversubscribe",
            metavar="ARGS",
        ),
    ],
    title="mpirun",
)
"""The ``mpirun_config`` section: its keys, types and ``accel launch`` flags."""

MPIRUN_CONFIG_KEYS: dict[str, str] = {option.name: option.help for option in MPIRUN_SECTION}
"""Keys of ``mpirun_config`` and what each holds."""

validate_section = MPIRUN_SECTION.validate
"""Problems of an ``mpirun_config`` mapping (empty when it is valid)."""

__all__ = ["FLAVORS", "MPIRUN_CONFIG_KEYS", "MPIRUN_SECTION", "validate_section"]
