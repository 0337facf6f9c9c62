"""The SageMaker launcher: ``compute_environment: AMAZON_SAGEMAKER`` runs as a training job.

``accel launch`` checks the job definition here (clear errors, exit 2, the
boolean-argument warning) and then runs :mod:`accel_cluster.sagemaker.submit`, which
creates the job through the ``sagemaker`` SDK.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from accel.launchers import Launcher, LaunchPlan

from .job import job_definition


class SageMakerLauncher(Launcher):
    """Submits the script as an Amazon SageMaker training job."""

    name = "sagemaker"
    priority = 100

    def claims(self, config: Mapping[str, object]) -> bool:
        """``compute_environment: AMAZON_SAGEMAKER``."""
        return config.get("compute_environment") == "AMAZON_SAGEMAKER"

    def command(self, config: Mapping[str, object], script: list[str]) -> list[str]:
        """``python -m accel_cluster.sagemaker.submit script args`` after checking the definition."""
        definition = job_definition(config, script)
        for note in definition.warnings:
            sys.stderr.write(f"accel launch: warning: {note}\n")
        return [sys.executable, "-m", "accel_cluster.sagemaker.submit", *script]

    def plan(
        self, config: dict[str, object], script: list[str], environment: Mapping[str, str]
    ) -> LaunchPlan:
        """The submit command; the job's processes run on SageMaker's instances, not here."""
        plan = super().plan(config, script, environment)
        plan.where = "an Amazon SageMaker training job"
        plan.machine_rank = None
        return plan


__all__ = ["SageMakerLauncher"]
