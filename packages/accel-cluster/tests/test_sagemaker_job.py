"""The SageMaker job definition: fields from the seed's YAML, hyperparameters, the boolean pitfall, errors."""

from __future__ import annotations

import json

import pytest
from accel.errors import ConfigError
from accel_cluster.sagemaker.job import (
    check_instance_type,
    job_definition,
    job_environment,
    script_hyperparameters,
)

SEED = {
    "base_job_name": "accelerate-sagemaker-1",
    "compute_environment": "AMAZON_SAGEMAKER",
    "distributed_type": "NO",
    "ec2_instance_type": "ml.p3.2xlarge",
    "gpu_ids": "all",
    "iam_role_name": "MY_IAM_ROLE_NAME",
    "mixed_precision": "no",
    "num_machines": 1,
    "profile": "MY_PROFILE_NAME",
    "py_version": "py38",
    "pytorch_version": "1.10.2",
    "region": "us-east-1",
    "transformers_version": "4.17.0",
    "use_cpu": False,
}


def test_seed_yaml_fields():
    env = {"ACCEL_MIXED_PRECISION": "no", "ACCEL_LAUNCH_ERROR_DIR": "/tmp/x", "HOME": "/root"}
    d = job_definition(SEED, ["code/train.py", "--lr", "1e-3", "--flag"], env)
    assert d.region == "us-east-1" and d.profile == "MY_PROFILE_NAME" and d.inputs is None
    assert d.estimator == {
        "entry_point": "train.py",
        "source_dir": "code",
        "role": "MY_IAM_ROLE_NAME",
        "transformers_version": "4.17.0",
        "pytorch_version": "1.10.2",
        "py_version": "py38",
        "base_job_name": "accelerate-sagemaker-1",
        "instance_count": 1,
        "instance_type": "ml.p3.2xlarge",
        "debugger_hook_config": False,
        "hyperparameters": {"lr": 0.001, "flag": True},
        "environment": {
            "ACCEL_MIXED_PRECISION": "no",
            "ACCEL_USE_SAGEMAKER": "true",
            "ACCEL_SAGEMAKER_DISTRIBUTED_TYPE": "NO",
        },
    }
    assert len(d.warnings) == 1 and "--flag" in d.warnings[0] and "type=bool" in d.warnings[0]
    assert json.loads(d.to_json())["estimator"]["instance_type"] == "ml.p3.2xlarge"


def test_multi_instance_distribution_and_additional_args():
    config = {**SEED, "num_machines": 2, "distributed_type": "MULTI_GPU"}
    config["additional_args"] = {"max_run": 3600, "image_uri": "my/image:1"}
    d = job_definition(config, ["train.py"], {})
    assert d.estimator["instance_count"] == 2
    assert d.estimator["distribution"] == {"torch_distributed": {"enabled": True}}
    assert d.estimator["max_run"] == 3600 and d.estimator["image_uri"] == "my/image:1"
    no_versions = {k: v for k, v in config.items() if not k.endswith("_version")}
    assert job_definition(no_versions, ["train.py"], {}).estimator["image_uri"] == "my/image:1"


def test_inputs_and_metrics_files(tmp_path):
    inputs = tmp_path / "inputs.tsv"
    inputs.write_text("channel\turi\ntrain\ts3://b/train\ntest\ts3://b/test\n")
    metrics = tmp_path / "metrics.tsv"
    metrics.write_text("name\tregex\nloss\tloss: ([0-9.]+)\n")
    config = {**SEED, "sagemaker_inputs_file": str(inputs), "sagemaker_metrics_file": str(metrics)}
    d = job_definition(config, ["train.py"], {})
    assert d.inputs == {"train": "s3://b/train", "test": "s3://b/test"}
    assert d.estimator["metric_definitions"] == [{"Name": "loss", "Regex": "loss: ([0-9.]+)"}]
    inputs.write_text("channel\turi\ntrain s3://b/train\n")
    with pytest.raises(ConfigError, match=r"sagemaker_inputs_file: .*:2: expected"):
        job_definition(config, ["train.py"], {})
    with pytest.raises(ConfigError, match="sagemaker_metrics_file: gone.tsv does not exist"):
        job_definition({**SEED, "sagemaker_metrics_file": "gone.tsv"}, ["train.py"], {})


@pytest.mark.parametrize(
    "value", ["ml.p3.2xlarge", "ml.g5.xlarge", "ml.m5.large", "ml.p4d.24xlarge", "ml.trn1n.32xlarge",
              "ml.g4dn.12xlarge", "ml.t3.medium", "local", "local_gpu"],
)  # fmt: skip
def test_instance_types_accepted(value):
    assert check_instance_type(value) == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("p3.2xlarge", "did you mean ml.p3.2xlarge?"),
        ("ml.p3", "not a SageMaker instance type"),
        ("ML.P3.2XLARGE", "not a SageMaker instance type"),
        ("ml.p3.2xlarge ", None),
        ("", "ec2_instance_type is required"),
        (None, "ec2_instance_type is required"),
    ],
)
def test_instance_types_rejected(value, message):
    if message is None:
        assert check_instance_type(value) == "ml.p3.2xlarge"
        return
    with pytest.raises(ConfigError, match=message.replace("?", r"\?")):
        check_instance_type(value)


def test_hyperparameters_from_script_arguments():
    params, notes = script_hyperparameters(
        [
            "--lr",
            "0.1",
            "--epochs=3",
            "--name",
            "tiny",
            "--shift",
            "-2",
            "--ok",
            "false",
            "--a",
            "--b",
        ]
    )
    assert params == {
        "lr": 0.1,
        "epochs": 3,
        "name": "tiny",
        "shift": -2,
        "ok": False,
        "a": True,
        "b": True,
    }
    assert [n.split("the bare flag ")[1].split()[0] for n in notes] == ["--a", "--b"]
    with pytest.raises(ConfigError, match="SageMaker passes only `--name value` arguments"):
        script_hyperparameters(["data.csv"])


@pytest.mark.parametrize(
    ("change", "script", "message"),
    [
        ({"iam_role_name": None}, ["t.py"], "iam_role_name is required"),
        ({"region": ""}, ["t.py"], "region is required"),
        ({"pytorch_version": None}, ["t.py"], "pytorch_version is required"),
        ({"module": True}, ["t.py"], "--module and --no_python cannot be used"),
        ({}, ["run.sh"], "runs a Python script file, not 'run.sh'"),
        ({"additional_args": ["x"]}, ["t.py"], "additional_args must be a mapping"),
    ],
)
def test_bad_job_settings(change, script, message):
    with pytest.raises(ConfigError, match=message):
        job_definition({**SEED, **change}, script, {})


def test_launch_config_is_shrunk_to_the_environment_limit():
    config = {k: v for k, v in SEED.items()}
    config.update(
        {"fsdp_config": {}, "tpu_env": [], "num_processes": 1, "main_training_function": "main"}
    )
    config["note"] = "x" * 100
    long = json.dumps(config, sort_keys=True) + " " * 400
    env, notes = job_environment({"ACCEL_LAUNCH_CONFIG": long}, "NO")
    shrunk = json.loads(env["ACCEL_LAUNCH_CONFIG"])
    assert len(env["ACCEL_LAUNCH_CONFIG"]) <= 512 and notes == []
    assert "ec2_instance_type" not in shrunk and "fsdp_config" not in shrunk
    assert "num_processes" not in shrunk and shrunk["note"] == "x" * 100
    huge = json.dumps({"note": "x" * 600})
    env, notes = job_environment({"ACCEL_LAUNCH_CONFIG": huge}, "NO")
    assert "ACCEL_LAUNCH_CONFIG" not in env and "512-character" in notes[0]
