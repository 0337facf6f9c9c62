"""Entry-point module of accel-cluster's SageMaker launcher: launcher, flags, questions."""

from __future__ import annotations

from typing import Any

from accel.config.options import Option, Section
from accel.hookspecs import hookimpl


@hookimpl
def accel_launchers() -> list[type]:
    """The SageMaker launcher."""
    from .launcher import SageMakerLauncher

    return [SageMakerLauncher]


SAGEMAKER_OPTIONS = Section(
    "",
    [
        Option(
            "sagemaker_detach",
            bool,
            help="SageMaker: return once the job is created instead of following its logs",
            store_true=True,
            in_file=False,
        )
    ],
    title="SageMaker",
)
"""The launcher's own option (not a setting of the config file)."""


@hookimpl
def accel_launch_arguments(parser: Any) -> None:
    """The SageMaker keys as flags (they override the config file; declared in
    :data:`accel.config.core_options.CORE_SECTION`), and ``--sagemaker_detach``."""
    from accel.config.core_options import CORE_SECTION

    CORE_SECTION.add_arguments(parser, check=False, plugin="accel-cluster")
    SAGEMAKER_OPTIONS.add_arguments(parser)


@hookimpl
def accel_config_questions(ask: Any, config: dict) -> None:
    """Whether the job runs on Amazon SageMaker, and the job's settings."""
    if config.get("mpirun_config") or config.get("slurm_config"):
        return  # already a job for this machine's (or cluster's) launcher
    if not ask.confirm(
        "Do you want to run the training on Amazon SageMaker?", default=False, key="use_sagemaker"
    ):
        return
    from .job import check_instance_type

    def valid_type(answer: str) -> str | None:
        try:
            check_instance_type(answer)
        except Exception as exc:
            return str(exc)
        return None

    config["compute_environment"] = "AMAZON_SAGEMAKER"
    config["iam_role_name"] = ask.text(
        "Which IAM role should the job run as (name or ARN)?",
        "",
        key="iam_role_name",
        validate=lambda a: None if a.strip() else "enter a role name",
    ).strip()
    config["profile"] = (
        ask.text("Which AWS profile (empty: default credentials)?", "", key="profile").strip()
        or None
    )
    config["region"] = ask.text("Which AWS region?", "us-east-1", key="region").strip()
    config["ec2_instance_type"] = ask.text(
        "Which instance type?", "ml.p3.2xlarge", key="ec2_instance_type", validate=valid_type
    ).strip()
    config["base_job_name"] = ask.text(
        "Training job name prefix?", "accel-sagemaker", key="base_job_name"
    ).strip()
    config["transformers_version"] = ask.text(
        "transformers version of the container?", "4.17.0", key="transformers_version"
    ).strip()
    config["pytorch_version"] = ask.text(
        "PyTorch version of the container?", "1.10.2", key="pytorch_version"
    ).strip()
    config["py_version"] = ask.text(
        "Python version of the container?", "py38", key="py_version"
    ).strip()


@hookimpl
def accel_env_info() -> dict[str, str]:
    """The installed SageMaker SDK version."""
    from importlib import metadata

    try:
        return {"SageMaker SDK": metadata.version("sagemaker")}
    except metadata.PackageNotFoundError:
        return {"SageMaker SDK": "not installed (pip install 'accel-cluster[sagemaker]')"}
