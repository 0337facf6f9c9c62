"""MPI host files, both argument styles, the rank translation and Open MPI's environment forwarding."""

from __future__ import annotations

import os
import shutil
import sys

import pytest
from accel.errors import ConfigError
from accel_cluster.mpi import forward, worker
from accel_cluster.mpi.config import validate_section
from accel_cluster.mpi.hostfile import Host, read_hostfile
from accel_cluster.mpi.launcher import (
    MpiLauncher,
    detect_flavor,
    main_address,
    mpirun_arguments,
    processes,
)

ROOT = ["--allow-run-as-root"] if os.geteuid() == 0 else []


def test_hostfile_formats(tmp_path):
    path = tmp_path / "hosts"
    path.write_text(
        "# cluster\nnode1 slots=4\n\nnode2:2   # MPICH style\n10.0.0.3\nn4 slots=2 max_slots=8\n"
    )
    assert read_hostfile(path) == [
        Host("node1", 4),
        Host("node2", 2),
        Host("10.0.0.3"),
        Host("n4", 2),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "lists no host"),
        ("# only a comment\n", "lists no host"),
        ("node1 slots=0\n", "slots=0 is not a positive count"),
        ("node1 slots\n", "cannot read"),
        ("node 1\n", "cannot read"),
    ],
)
def test_bad_hostfiles(tmp_path, text, message):
    path = tmp_path / "hosts"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        read_hostfile(path)
    assert str(info.value).startswith("mpirun_config.mpirun_hostfile: ") and message in str(
        info.value
    )


def test_missing_hostfile(tmp_path):
    with pytest.raises(ConfigError, match="does not exist; write a host file"):
        read_hostfile(tmp_path / "nope")
    with pytest.raises(ConfigError, match="is a directory"):
        read_hostfile(tmp_path)


def test_argument_styles():
    assert mpirun_arguments("openmpi", "mpirun", "/h", 8, 4) == [
        "mpirun", "--hostfile", "/h", "-np", "8", "--map-by", "ppr:4:node", *ROOT,
    ]  # fmt: skip
    assert mpirun_arguments("mpich", "mpiexec", "/h", 8, 4) == [
        "mpiexec", "-f", "/h", "-n", "8", "-ppn", "4", "-genvall",
    ]  # fmt: skip


def test_processes_and_main_address(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("localhost slots=2\nnode2 slots=2\n")
    section = {"mpirun_config": {"mpirun_hostfile": str(path)}}
    assert processes({"num_processes": 4, "num_machines": 2, **section}, 2) == (4, 2)
    assert processes({"num_processes": 2, "num_machines": 1, "nproc_per_node": 2}, 2) == (2, 2)
    with pytest.raises(ConfigError, match="num_machines 3 but the host file"):
        processes({"num_processes": 3, "num_machines": 3, **section}, 2)
    assert main_address(section) == "127.0.0.1"
    assert main_address({**section, "main_process_ip": "10.1.1.1"}) == "10.1.1.1"
    path.write_text("node2\nlocalhost\n")
    assert main_address(section) == "node2"


def test_command_and_environment(tmp_path, monkeypatch):
    path = tmp_path / "hosts"
    path.write_text("localhost:2\n")
    monkeypatch.setattr("accel_cluster.mpi.launcher.find_mpirun", lambda: "/usr/bin/mpiexec")
    config = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "MULTI_CPU",
        "num_processes": 2,
        "num_machines": 1,
        "mpirun_config": {
            "mpirun_hostfile": str(path),
            "mpirun_flavor": "mpich",
            "mpirun_ccl": 2,
            "mpirun_args": "-bind-to core",
        },
    }
    launcher = MpiLauncher()
    assert launcher.claims(config)
    assert not launcher.claims({**config, "distributed_type": "MULTI_GPU"})
    assert not launcher.claims({**config, "mpirun_config": {}})
    argv = launcher.command(config, ["train.py", "--lr", "1"])
    assert argv == [
        "/usr/bin/mpiexec", "-f", str(path), "-n", "2", "-ppn", "2", "-genvall", "-bind-to", "core",
        sys.executable, "-m", "accel_cluster.mpi.worker", "--script", "train.py", "--lr", "1",
    ]  # fmt: skip
    plan = launcher.plan(config, ["train.py", "--lr", "1"], {"ACCEL_X": "1"})
    assert plan.argv == argv and plan.launcher == "mpirun"
    assert plan.environment == {
        "ACCEL_X": "1",  # what every worker gets comes through unchanged
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
        "OMP_NUM_THREADS": "1",
        "CCL_WORKER_COUNT": "2",
    }
    assert (plan.num_processes, plan.num_machines, plan.nproc_per_node) == (2, 1, 2)
    openmpi = {
        **config,
        "mpirun_config": {"mpirun_hostfile": str(path), "mpirun_flavor": "openmpi"},
    }
    argv = launcher.command({**openmpi, "no_python": True}, ["hostname"])
    assert argv[:3] == [sys.executable, "-m", "accel_cluster.mpi.forward"]
    assert argv[3:6] == ["/usr/bin/mpiexec", "--hostfile", str(path)] and argv[-1] == "hostname"
    with pytest.raises(ConfigError, match="mpirun_flavor: 'lam' is not allowed"):
        launcher.command(
            {**config, "mpirun_config": {"mpirun_hostfile": str(path), "mpirun_flavor": "lam"}},
            ["t.py"],
        )


def test_no_mpirun_on_path(tmp_path, monkeypatch):
    path = tmp_path / "hosts"
    path.write_text("localhost\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    config = {"num_processes": 1, "mpirun_config": {"mpirun_hostfile": str(path)}}
    with pytest.raises(ConfigError, match="neither mpirun nor mpiexec is on PATH"):
        MpiLauncher().command(config, ["t.py"])


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs mpirun (Open MPI)")
def test_detects_debian_open_mpi():
    assert detect_flavor(shutil.which("mpirun")) == "openmpi"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
            ("3", "4", "1", "2"),
        ),
        (
            {"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4"},
            ("5", "8", "1", "4"),
        ),
        (
            {"MV2_COMM_WORLD_RANK": "1", "MV2_COMM_WORLD_SIZE": "2"},
            ("1", "2", "1", "2"),
        ),
    ],
    ids=["openmpi", "mpich", "mvapich"],
)  # fmt: skip
def test_worker_translates_mpi_ranks(env, expected):
    out = worker.torch_variables(env)
    assert (out["RANK"], out["WORLD_SIZE"], out["LOCAL_RANK"], out["LOCAL_WORLD_SIZE"]) == expected
    full = dict(env, MASTER_ADDR="10.0.0.1")
    worker.apply(full)
    assert full["MASTER_ADDR"] == "10.0.0.1" and full["MASTER_PORT"] == "29500"


def test_worker_outside_mpirun_fails_clearly():
    with pytest.raises(RuntimeError, match="must be started by mpirun"):
        worker.torch_variables({})


def test_forwarding_names_every_launch_variable():
    env = {"ACCEL_USE_CPU": "true", "MASTER_ADDR": "h", "HOME": "/root", "OMP_NUM_THREADS": "1"}
    assert forward.forward_arguments(env) == [
        "-x", "ACCEL_USE_CPU", "-x", "MASTER_ADDR", "-x", "OMP_NUM_THREADS",
    ]  # fmt: skip


def test_section_validator():
    assert (
        validate_section({"mpirun_hostfile": "h", "mpirun_ccl": 1, "mpirun_flavor": "auto"}) == []
    )
    problems = validate_section({"mpirun_hosts": "h", "mpirun_ccl": 0, "mpirun_flavor": "lam"})
    assert any("unknown key 'mpirun_hosts'" in p for p in problems)
    assert any("mpirun_ccl=0" in p for p in problems)
    assert any("mpirun_flavor='lam'" in p for p in problems)
