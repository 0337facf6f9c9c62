"""Submit (or, with ``debug``, print) the SageMaker training job of an ``accel launch``.

``python -m accel_cluster.sagemaker.submit train.py ARGS...`` is the command the
SageMaker launcher builds. It runs with the launch environment, so the resolved
settings are in ``ACCEL_LAUNCH_CONFIG`` and the ``ACCEL_*`` variables that become the
job's Environment. The job is created by the ``sagemaker`` SDK (v2) ``HuggingFace``
estimator; nothing here speaks to AWS itself.

With ``debug`` set (``accel launch --debug``) the estimator is built and run up to
the ``CreateTrainingJob`` call, whose request is printed as JSON instead of sent
(the role is still resolved and the source directory still uploaded, since the
request names both).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from accel.config.launched import launched_config

from .job import JobDefinition, job_definition

if TYPE_CHECKING:
    from sagemaker.huggingface import HuggingFace

PROG = "accel launch"


def _estimator(definition: JobDefinition) -> HuggingFace:
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")  # v2 is a deliberate choice
    # the SDK logs where it looked for defaults files on stdout: keep stdout for --debug's JSON
    logging.getLogger("sagemaker.config").setLevel(logging.WARNING)
    # a telemetry request that cannot be sent is not the user's problem: no traceback for it
    logging.getLogger("sagemaker.telemetry").setLevel(logging.CRITICAL)
    try:
        import boto3
        import sagemaker
        from sagemaker.huggingface import HuggingFace
    except ImportError as exc:
        raise SystemExit(
            f"{PROG}: error: compute_environment AMAZON_SAGEMAKER needs the SageMaker SDK: "
            f"pip install 'accel-cluster[sagemaker]' ({exc})"
        ) from None
    boto_session = boto3.Session(profile_name=definition.profile, region_name=definition.region)
    session = sagemaker.Session(boto_session=boto_session)
    return HuggingFace(**definition.estimator, sagemaker_session=session)


def create_request(estimator: HuggingFace, inputs: dict[str, str] | None) -> dict[str, object]:
    """Run ``estimator.fit`` up to CreateTrainingJob and return that request, unsent.

    botocore's Stubber answers the call; the request is validated against the API model.
    """
    from botocore.stub import Stubber

    client = estimator.sagemaker_session.sagemaker_client
    captured: dict[str, object] = {}
    client.meta.events.register(
        "before-parameter-build.sagemaker.CreateTrainingJob",
        lambda params, **_: captured.update(params),
    )
    stub = Stubber(client)
    stub.add_response("create_training_job", {"TrainingJobArn": "arn:aws:sagemaker:debug"})
    with stub:
        estimator.fit(inputs=inputs, wait=False)
    return captured


def main(argv: list[str] | None = None) -> int:
    """Build the job from the launch settings and submit it (or print it under ``debug``)."""
    script = sys.argv[1:] if argv is None else argv
    if not script:
        sys.stderr.write("usage: python -m accel_cluster.sagemaker.submit SCRIPT [ARGS...]\n")
        return 2
    config = launched_config()
    definition = job_definition(config, script)
    try:
        return _submit(config, definition)
    except Exception as exc:  # the SDK's and AWS's errors: one line, not a traceback
        if type(exc).__module__.split(".")[0] not in ("botocore", "boto3", "sagemaker") and not (
            isinstance(exc, ValueError)
        ):
            raise
        sys.stderr.write(f"{PROG}: error: SageMaker: {type(exc).__name__}: {exc}\n")
        return 1


def _submit(config: Mapping[str, object], definition: JobDefinition) -> int:
    estimator = _estimator(definition)
    if config.get("debug"):
        request = create_request(estimator, definition.inputs)
        sys.stdout.write(json.dumps(request, indent=2, sort_keys=True, default=str) + "\n")
        sys.stderr.write(f"{PROG}: debug: the training job above was not submitted\n")
        return 0
    wait = not config.get("sagemaker_detach")
    estimator.fit(inputs=definition.inputs, wait=wait)
    job = estimator.latest_training_job.name
    sys.stderr.write(f"{PROG}: training job {job} submitted in {definition.region}\n")
    if wait:
        sys.stderr.write(f"{PROG}: model data: {estimator.model_data}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
