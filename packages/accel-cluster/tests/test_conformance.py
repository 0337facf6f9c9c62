"""accel-cluster's MPI launcher passes the launcher conformance kit (where ``mpirun`` is installed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accel.testing import LauncherConformance


class TestMpirunLauncherConformance(LauncherConformance):
    """Two processes on this machine through ``mpirun`` and a one-line host file.

    Without ``mpirun`` on PATH the run check is skipped (the plan checks still run).
    """

    launcher_name = "mpirun"
    required_programs = ("mpirun",)

    def make_settings(self, folder: Path) -> dict[str, Any]:
        """``MULTI_CPU`` on 2 processes with a host file naming this machine."""
        hosts = folder / "hostfile"
        hosts.write_text("localhost slots=2\n")
        return {
            "num_processes": 2,
            "use_cpu": True,
            "distributed_type": "MULTI_CPU",
            "mpirun_config.mpirun_hostfile": str(hosts),
        }
