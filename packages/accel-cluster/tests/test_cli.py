"""The plugins through the real `accel` command: registration, questions, flags, clear errors."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ACCEL = Path(sys.executable).with_name("accel")
SEED_SAGEMAKER = Path(__file__).parents[2] / "accel-cli" / "tests" / "data" / "seed_sagemaker.yaml"


@pytest.fixture
def accel(tmp_path):
    """``accel(*args, env=None)`` run in ``tmp_path`` with a clean environment."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ACCEL_", "SLURM_", "OMPI_", "PMI_"))
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env["ACCEL_CONFIG_DIR"] = str(tmp_path / "accel-config")
    (tmp_path / "train.py").write_text("raise SystemExit('must not run')\n")
    (tmp_path / "hosts").write_text("localhost slots=2\n")

    def run(*args: str, extra: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(ACCEL), *args], cwd=tmp_path, env={**env, **(extra or {})},
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    return run


def test_plugins_are_registered(accel):
    out = accel("plugins").stdout
    for name in ("mpi", "slurm", "sagemaker"):
        line = next(line for line in out.splitlines() if line.startswith(name + " "))
        assert "accel-cluster" in line and "launchers" in line
    from accel.plugins import registry

    names = dict(registry.launchers())
    assert {"mpirun", "slurm", "sagemaker"} <= set(names)


def _configure(accel, tmp_path, answers: dict) -> dict:
    (tmp_path / "answers.yaml").write_text(yaml.safe_dump(answers))
    done = accel("config", "--answers", "answers.yaml", "--config_file", "c.yaml")
    assert done.returncode == 0, done.stderr
    return yaml.safe_load((tmp_path / "c.yaml").read_text())


def _planned(accel, *argv: str, extra: dict | None = None) -> dict[str, str]:
    done = accel("launch", "--dry_run", *argv, extra=extra)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    return lines


NEEDS_MPIRUN = pytest.mark.skipif(
    shutil.which("mpirun") is None,
    reason="needs mpirun (Open MPI: apt-get install openmpi-bin, see .ci/setup.d/openmpi.sh)",
)


def test_mpi_question_and_torchrun_without_host_file(accel, tmp_path):
    """The questions write the section; without a host file the plan is torchrun's (no MPI needed)."""
    config = _configure(
        accel,
        tmp_path,
        {"distributed_type": "multi-CPU", "num_processes": 2, "use_mpirun": True,
         "mpirun_config.mpirun_hostfile": "hosts", "mpirun_config.mpirun_ccl": 2},
    )  # fmt: skip
    assert config["mpirun_config"] == {"mpirun_hostfile": "hosts", "mpirun_ccl": 2}
    plan = _planned(accel, "--cpu", "--num_processes", "2", "train.py")  # no host file: torchrun
    assert plan["launcher"] == "torchrun"


@NEEDS_MPIRUN
def test_mpi_config_and_flag_plan_an_mpirun_launch(accel, tmp_path):
    _configure(
        accel,
        tmp_path,
        {"distributed_type": "multi-CPU", "num_processes": 2, "use_mpirun": True,
         "mpirun_config.mpirun_hostfile": "hosts", "mpirun_config.mpirun_ccl": 2},
    )  # fmt: skip
    plan = _planned(accel, "--config_file", "c.yaml", "train.py")
    assert plan["launcher"] == "mpirun" and "-np 2 --map-by ppr:2:node" in plan["command"]
    plan = _planned(
        accel, "--cpu", "--num_processes", "2", "--mpirun_hostfile", "hosts", "train.py"
    )
    assert (
        plan["launcher"] == "mpirun"
        and "accel_cluster.mpi.worker --script train.py" in plan["command"]
    )


def test_slurm_question_and_flag(accel, tmp_path):
    config = _configure(
        accel,
        tmp_path,
        {"distributed_type": "multi-CPU", "use_slurm": True, "slurm_config.slurm_mode": "task"},
    )
    assert config["slurm_config"] == {"slurm_mode": "task"}
    slurm = {"SLURM_JOB_ID": "5", "SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_NODEID": "0",
             "SLURM_JOB_NODELIST": "node[1]"}  # fmt: skip
    plan = _planned(accel, "--config_file", "c.yaml", "train.py", extra=slurm)
    assert plan["launcher"] == "slurm" and plan["command"].endswith("--script train.py")
    envs = dict(v.split("=", 1) for k, v in _iter_env(accel, slurm))
    assert envs["RANK"] == "1" and envs["WORLD_SIZE"] == "2" and envs["MASTER_ADDR"] == "node1"
    done = accel("launch", "--dry_run", "--slurm_mode", "node", "--cpu", "train.py",
                 extra={**slurm, "SLURM_NNODES": "1"})  # fmt: skip
    assert done.returncode == 2 and "duplicate node ranks" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def _iter_env(accel, slurm):
    done = accel("launch", "--dry_run", "--cpu", "train.py", extra=slurm)
    return [line.split(": ", 1) for line in done.stdout.splitlines() if line.startswith("env: ")]


def test_sagemaker_question_and_flags(accel, tmp_path):
    config = _configure(
        accel,
        tmp_path,
        {"use_sagemaker": True, "iam_role_name": "arn:aws:iam::1:role/R", "region": "eu-west-1",
         "ec2_instance_type": "ml.g5.xlarge", "base_job_name": "demo"},
    )  # fmt: skip
    assert config["compute_environment"] == "AMAZON_SAGEMAKER"
    assert config["ec2_instance_type"] == "ml.g5.xlarge" and config["py_version"] == "py38"
    plan = _planned(accel, "--config_file", "c.yaml", "train.py", "--lr", "1")
    assert plan["launcher"] == "sagemaker"
    assert plan["command"].endswith("-m accel_cluster.sagemaker.submit train.py --lr 1")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--ec2_instance_type", "p3.2xlarge"], "ec2_instance_type: 'p3.2xlarge' is not a SageMaker instance type"),
        (["--iam_role_name", ""], "iam_role_name is required"),
        (["--no_python"], "--module and --no_python cannot be used"),
    ],
)  # fmt: skip
def test_sagemaker_bad_values_exit_2(accel, argv, message):
    done = accel("launch", "--config_file", str(SEED_SAGEMAKER), *argv, "train.py")
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr


def test_boolean_pitfall_is_warned_at_launch(accel):
    done = accel("launch", "--dry_run", "--config_file", str(SEED_SAGEMAKER), "train.py", "--fast")
    assert done.returncode == 0
    assert "warning: SageMaker passes script arguments" in done.stderr and "--fast" in done.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mpirun_config:\n  mpirun_hosts: h\n", "mpirun_config: unknown key 'mpirun_hosts'"),
        (
            "slurm_config:\n  slurm_mode: nodes\n",
            "slurm_config: slurm_config.slurm_mode='nodes' is not allowed",
        ),
    ],
)
def test_bad_sections_exit_2(accel, tmp_path, text, message):
    (tmp_path / "bad.yaml").write_text("distributed_type: MULTI_CPU\nnum_processes: 2\n" + text)
    done = accel("launch", "--config_file", "bad.yaml", "train.py")
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_env_lines(monkeypatch):
    from accel_cluster.mpi.plugin import accel_env_info as mpi_info
    from accel_cluster.sagemaker.plugin import accel_env_info as sagemaker_info
    from accel_cluster.slurm.plugin import accel_env_info as slurm_info

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert slurm_info() == {"SLURM": "not inside a SLURM step"}
    assert sagemaker_info()["SageMaker SDK"].startswith("2.")
    line = mpi_info()["MPI launcher"]
    assert ("openmpi style" in line) if shutil.which("mpirun") else ("no mpirun" in line)
