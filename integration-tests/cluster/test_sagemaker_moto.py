"""The seed's SageMaker YAML through `accel launch` and the real sagemaker SDK, against moto.

`accel launch` (in this process, through accel-cli's planner) checks the job and builds
the submit command and its environment; the submit module then runs in this process under
moto's AWS emulator (`mock_aws`), so the SDK's real requests (IAM role lookup, S3 upload of
the source directory, CreateTrainingJob) reach moto and nothing reaches AWS.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

if importlib.util.find_spec("sagemaker") is None:
    pytest.skip("needs accel-cluster[sagemaker]", allow_module_level=True)
moto = pytest.importorskip("moto", reason="needs moto (root dev group)")

SEED_YAML = (
    Path(__file__).parents[2] / "packages" / "accel-cli" / "tests" / "data" / "seed_sagemaker.yaml"
)
IMAGE = (
    "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:"
    "1.10.2-transformers4.17.0-gpu-py38-cu113-ubuntu20.04"
)
ROLE_ARN = "arn:aws:iam::123456789012:role/MY_IAM_ROLE_NAME"


@pytest.fixture
def aws(tmp_path, monkeypatch):
    """moto's AWS with the seed's profile configured and the seed's IAM role created."""
    config = tmp_path / "aws-config"
    config.write_text(
        "[profile MY_PROFILE_NAME]\nregion = us-east-1\n"
        "aws_access_key_id = testing\naws_secret_access_key = testing\n"
    )
    for name in list(os.environ):
        if name.startswith(("AWS_", "ACCEL_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path / "accel-config"))
    with moto.mock_aws():
        import boto3

        iam = boto3.Session(profile_name="MY_PROFILE_NAME").client("iam")
        iam.create_role(RoleName="MY_IAM_ROLE_NAME", AssumeRolePolicyDocument="{}")
        yield boto3.Session(profile_name="MY_PROFILE_NAME")


def _project(tmp_path: Path) -> Path:
    source = tmp_path / "project" / "src"
    source.mkdir(parents=True)
    (source / "train.py").write_text("print('training')\n")
    (source / "requirements.txt").write_text("accel-core\n")
    return source / "train.py"


def _launch(argv, monkeypatch, capsys):
    """Plan `accel launch argv`, then run its submit command here with its environment."""
    from accel_cli.launch import plan

    planned = plan(argv)
    command, env = planned["command"], planned["env"]
    assert planned["launcher"].name == "sagemaker"
    assert command[1:3] == ["-m", "accel_cluster.sagemaker.submit"]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from accel_cluster.sagemaker.submit import main

    assert main(command[3:]) == 0
    return capsys.readouterr()


def _check_request(request: dict, script_dir: Path) -> None:
    assert request["TrainingJobName"].startswith("accelerate-sagemaker-1-")
    assert request["RoleArn"] == ROLE_ARN
    assert request["AlgorithmSpecification"]["TrainingImage"] == IMAGE
    assert request["AlgorithmSpecification"]["TrainingInputMode"] == "File"
    assert request["ResourceConfig"]["InstanceType"] == "ml.p3.2xlarge"
    assert request["ResourceConfig"]["InstanceCount"] == 1
    hp = request["HyperParameters"]
    assert json.loads(hp["sagemaker_program"]) == "train.py"
    assert json.loads(hp["sagemaker_region"]) == "us-east-1"
    assert json.loads(hp["sagemaker_submit_directory"]).endswith("/source/sourcedir.tar.gz")
    assert json.loads(hp["lr"]) == 0.1
    assert json.loads(hp["epochs"]) == 3
    assert json.loads(hp["name"]) == "tiny"
    assert json.loads(hp["some_bool_arg"]) is True
    env = request["Environment"]
    assert env["ACCEL_USE_SAGEMAKER"] == "true"
    assert env["ACCEL_SAGEMAKER_DISTRIBUTED_TYPE"] == "NO"
    assert env["ACCEL_MIXED_PRECISION"] == "bf16"  # the flag overrides the seed's 'no'
    assert env["ACCEL_DISTRIBUTED_TYPE"] == "NO"
    assert env["ACCEL_USE_CPU"] == "false"
    launched = json.loads(env["ACCEL_LAUNCH_CONFIG"])
    assert launched["mixed_precision"] == "bf16"
    assert all(len(v) <= 512 for v in env.values())
    assert "ACCEL_LAUNCH_ERROR_DIR" not in env and "ACCEL_CONFIG_DIR" not in env
    assert request["OutputDataConfig"]["S3OutputPath"].startswith("s3://sagemaker-us-east-1-")


def test_debug_prints_the_create_training_job_request(aws, tmp_path, monkeypatch, capsys):
    script = _project(tmp_path)
    argv = ["--config_file", str(SEED_YAML), "--mixed_precision", "bf16", "--debug", str(script)]
    argv += ["--lr", "0.1", "--epochs=3", "--name", "tiny", "--some_bool_arg"]
    out = _launch(argv, monkeypatch, capsys)
    request = json.loads(out.out)
    _check_request(request, script.parent)
    assert "was not submitted" in out.err
    assert "--some_bool_arg" in out.err and "type=bool" in out.err  # the seed's pitfall, warned
    assert aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


def test_seed_yaml_creates_the_training_job(aws, tmp_path, monkeypatch, capsys):
    script = _project(tmp_path)
    argv = ["--config_file", str(SEED_YAML), "--sagemaker_detach", "--mixed_precision", "bf16"]
    argv += [str(script), "--lr", "0.1", "--epochs", "3", "--name", "tiny", "--some_bool_arg"]
    out = _launch(argv, monkeypatch, capsys)
    assert "submitted in us-east-1" in out.err
    sm = aws.client("sagemaker")
    (summary,) = sm.list_training_jobs()["TrainingJobSummaries"]
    job = sm.describe_training_job(TrainingJobName=summary["TrainingJobName"])
    assert job["TrainingJobName"].startswith("accelerate-sagemaker-1-")
    assert job["RoleArn"] == ROLE_ARN
    assert job["AlgorithmSpecification"]["TrainingImage"] == IMAGE
    assert job["ResourceConfig"]["InstanceType"] == "ml.p3.2xlarge"
    assert job["ResourceConfig"]["InstanceCount"] == 1
    assert json.loads(job["HyperParameters"]["lr"]) == 0.1
    assert json.loads(job["HyperParameters"]["some_bool_arg"]) is True
    # the source directory was uploaded where the job looks for it, with the script inside
    uri = json.loads(job["HyperParameters"]["sagemaker_submit_directory"])
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    body = aws.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        assert {"train.py", "requirements.txt"} <= set(tar.getnames())
        assert tar.extractfile("train.py").read() == b"print('training')\n"


def test_aws_errors_are_one_line(aws, tmp_path, monkeypatch, capsys):
    script = _project(tmp_path)
    argv = ["--config_file", str(SEED_YAML), "--iam_role_name", "NO_SUCH_ROLE", str(script)]
    from accel_cli.launch import plan

    planned = plan(argv)
    for name, value in planned["env"].items():
        monkeypatch.setenv(name, value)
    from accel_cluster.sagemaker.submit import main

    assert main(planned["command"][3:]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("accel launch: error: SageMaker: ") and "NO_SUCH_ROLE" in err[-1]
    assert "Traceback" not in "\n".join(err)
