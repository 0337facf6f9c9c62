"""The ``mpirun_config`` section (Accelerate's keys plus two of accel's) and its validator."""

from __future__ import annotations

from typing import Any

MPIRUN_CONFIG_KEYS: dict[str, str] = {
    "mpirun_hostfile": "path of the MPI host file (one `host slots=N` or `host:N` per line)",
    "mpirun_ccl": "number of oneCCL worker threads (CCL_WORKER_COUNT)",
    "mpirun_flavor": "argument style: auto (from `mpirun --version`), openmpi or mpich",
    "mpirun_args": "extra mpirun arguments, e.g. --oversubscribe",
}
"""Keys of ``mpirun_config`` and what each holds."""


def validate_section(section: dict[str, Any]) -> list[str]:
    """Problems of an ``mpirun_config`` mapping (empty when it is valid)."""
    from .launcher import FLAVORS

    problems = []
    for key, value in section.items():
        if key not in MPIRUN_CONFIG_KEYS:
            problems.append(f"unknown key {key!r}; allowed: {', '.join(MPIRUN_CONFIG_KEYS)}")
        elif value is None:
            continue
        elif key == "mpirun_ccl" and (
            isinstance(value, bool) or not str(value).strip().isdigit() or int(value) < 1
        ):
            problems.append(f"mpirun_ccl: {value!r} is not a positive whole number")
        elif key == "mpirun_flavor" and str(value).lower() not in FLAVORS:
            problems.append(
                f"mpirun_flavor: {value!r} is not allowed; use one of {', '.join(FLAVORS)}"
            )
        elif key in ("mpirun_hostfile", "mpirun_args") and not isinstance(value, str):
            problems.append(f"{key}: {value!r} is not a string")
    return problems


__all__ = ["MPIRUN_CONFIG_KEYS", "validate_section"]
