"""SLURM environment parsing, mode choice and the launcher's command and variables."""

from __future__ import annotations

import sys

import pytest
from accel.errors import ConfigError
from accel_cluster.slurm.environment import read_task, tasks_per_node
from accel_cluster.slurm.launcher import SlurmLauncher, choose_mode, node_processes


def slurm(**values: object) -> dict[str, str]:
    base = {"job_id": 99, "procid": 0, "ntasks": 1, "nodeid": 0, "job_nodelist": "localhost"}
    base.update(values)
    return {f"SLURM_{k.upper()}": str(v) for k, v in base.items()}


def test_reads_rank_node_rank_world_size_and_main_address():
    env = slurm(
        procid=5, ntasks=8, nodeid=2, localid=1, nnodes=4, job_nodelist="node[01-04]",
        tasks_per_node="2(x4)",
    )  # fmt: skip
    task = read_task(env)
    assert (task.rank, task.world_size, task.node_rank, task.num_nodes) == (5, 8, 2, 4)
    assert (task.local_rank, task.local_world_size) == (1, 2)
    assert task.hosts == ("node01", "node02", "node03", "node04")
    assert task.main_address == "node01"
    assert task.default_port() == 20099


def test_step_variables_win_over_job_variables():
    env = slurm(ntasks=8, job_nodelist="n[1-4]", nnodes=4, nodeid=1)
    env.update(SLURM_STEP_NUM_TASKS="2", SLURM_STEP_NODELIST="n[2-3]", SLURM_STEP_NUM_NODES="2")
    task = read_task(env)
    assert task.world_size == 2 and task.hosts == ("n2", "n3") and task.main_address == "n2"


@pytest.mark.parametrize(
    ("text", "counts"), [("2", [2]), ("2(x3),1", [2, 2, 2, 1]), ("4,2(x2)", [4, 2, 2])]
)
def test_tasks_per_node(text, counts):
    assert tasks_per_node(text) == counts


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "not inside a SLURM allocation"),
        ({"SLURM_JOB_ID": "1"}, "SLURM_PROCID is not set"),
        (slurm(procid="x"), "SLURM_PROCID='x' is not a whole number"),
        (slurm(procid=2, ntasks=2), "SLURM_PROCID 2 is not below SLURM_NTASKS 2"),
        (slurm(nodeid=3, ntasks=4, job_nodelist="a,b"), "SLURM_NODEID 3 is not below"),
        (slurm(job_nodelist="a,b", nnodes=3), "names 2 node(s) but SLURM_NNODES is 3"),
        (slurm(job_nodelist="a[1-2],a2"), "appears twice"),
        (
            {**slurm(nodeid=0, ntasks=2, job_nodelist="a,b"), "SLURMD_NODENAME": "b"},
            "two nodes would share a node rank",
        ),
        (slurm(tasks_per_node="two"), "SLURM_TASKS_PER_NODE='two'"),
    ],
)
def test_bad_environments_are_clear_errors(env, message):
    with pytest.raises(ConfigError, match=None) as info:
        read_task(env)
    assert message in str(info.value)


def test_mode_choice_and_duplicate_node_ranks():
    one_per_node = read_task(slurm(ntasks=2, nnodes=2, job_nodelist="a,b"))
    two_per_node = read_task(slurm(ntasks=4, nnodes=2, job_nodelist="a,b", tasks_per_node="2(x2)"))
    assert choose_mode({}, one_per_node) == "node"
    assert choose_mode({}, two_per_node) == "task"
    assert choose_mode({"slurm_config": {"slurm_mode": "task"}}, one_per_node) == "task"
    with pytest.raises(ConfigError, match="duplicate node ranks"):
        choose_mode({"slurm_config": {"slurm_mode": "node"}}, two_per_node)
    with pytest.raises(ConfigError, match="slurm_mode: 'nodes' is not allowed"):
        choose_mode({"slurm_config": {"slurm_mode": "nodes"}}, one_per_node)


def test_processes_per_node():
    task = read_task(slurm(ntasks=2, nnodes=2, job_nodelist="a,b"))
    assert node_processes({"num_processes": 8, "num_machines": 1}, task) == 4
    assert node_processes({"num_processes": 1, "num_machines": 1}, task) == 1
    assert node_processes({"num_processes": 6, "num_machines": 2, "nproc_per_node": 3}, task) == 3
    with pytest.raises(ConfigError, match="num_machines 3 disagrees"):
        node_processes({"num_processes": 6, "num_machines": 3}, task)
    with pytest.raises(ConfigError, match="not divisible"):
        node_processes({"num_processes": 5, "num_machines": 1}, task)


def test_node_mode_runs_torchrun_with_slurm_topology(monkeypatch):
    env = slurm(procid=1, ntasks=2, nnodes=2, nodeid=1, job_nodelist="gpu-[1-2]", job_id=1234)
    monkeypatch.setattr("os.environ", env)
    launcher = SlurmLauncher()
    config = {"num_processes": 4, "num_machines": 1, "compute_environment": "LOCAL_MACHINE"}
    assert launcher.claims(config)
    argv = launcher.command(config, ["train.py", "--lr", "1"])
    assert argv[:3] == [sys.executable, "-m", "torch.distributed.run"]
    joined = " ".join(argv)
    assert "--nproc_per_node 2 --nnodes 2 --node_rank 1" in joined
    assert "--master_addr gpu-1 --master_port 21234" in joined
    assert argv[-3:] == ["train.py", "--lr", "1"]
    plan = launcher.plan(config, ["train.py", "--lr", "1"], {})
    assert plan.argv == argv and "RANK" not in plan.environment
    assert (plan.num_processes, plan.num_machines, plan.nproc_per_node) == (4, 2, 2)
    assert plan.machine_rank == 1 and plan.where == "SLURM job 1234 (2 nodes)"


def test_task_mode_sets_the_torch_variables(monkeypatch):
    env = slurm(procid=3, ntasks=4, nnodes=2, nodeid=1, localid=1, job_nodelist="a,b")
    env["SLURM_TASKS_PER_NODE"] = "2(x2)"
    monkeypatch.setattr("os.environ", env)
    launcher = SlurmLauncher()
    config = {"main_process_port": 4000, "compute_environment": "LOCAL_MACHINE"}
    assert launcher.command(config, ["t.py"]) == [
        sys.executable, "-m", "accel.launchers.worker", "--script", "t.py",
    ]  # fmt: skip
    plan = launcher.plan(config, ["t.py"], {})
    assert (plan.num_processes, plan.nproc_per_node, plan.machine_rank) == (4, 2, 1)
    assert plan.environment == {
        "OMP_NUM_THREADS": "1",
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "1",
        "NODE_RANK": "1",
        "MASTER_ADDR": "a",
        "MASTER_PORT": "4000",
    }


def test_claims_only_inside_a_multi_task_step(monkeypatch):
    launcher = SlurmLauncher()
    local = {"compute_environment": "LOCAL_MACHINE"}
    monkeypatch.setattr("os.environ", {})
    assert not launcher.claims(local)
    with pytest.raises(ConfigError, match="not inside a SLURM allocation"):
        launcher.command(local, ["t.py"])
    monkeypatch.setattr("os.environ", slurm())  # one task on one node: the local launchers run it
    assert not launcher.claims(local)
    assert launcher.claims({**local, "slurm_config": {"slurm_mode": "task"}})
    monkeypatch.setattr("os.environ", slurm(ntasks=2))
    assert launcher.claims(local)
    assert not launcher.claims({**local, "slurm_config": {"slurm_mode": "off"}})
    assert not launcher.claims({"compute_environment": "AMAZON_SAGEMAKER"})
