"""Reading a Kubeflow pod's variables (accel.config.kubeflow) and their layer in resolve()."""

from __future__ import annotations

import pytest
from accel.config.kubeflow import processes_per_pod, read_job
from accel.config.resolution import resolve
from accel.errors import ConfigError

TRAINJOB = {
    "PET_NNODES": "2",
    "PET_NPROC_PER_NODE": "3",
    "PET_NODE_RANK": "1",
    "JOB_COMPLETION_INDEX": "1",
    "PET_MASTER_ADDR": "job-node-0-0.job",
    "PET_MASTER_PORT": "29500",
}


def test_outside_a_pod_nothing_is_read():
    assert read_job({}) is None
    assert read_job({"MASTER_ADDR": "h", "MASTER_PORT": "1"}) is None  # no WORLD_SIZE / RANK
    exported = {"MASTER_ADDR": "h", "MASTER_PORT": "1", "WORLD_SIZE": "2", "RANK": "1"}
    assert read_job(exported) is None  # not in a Kubernetes pod: a script's own variables
    assert read_job({**exported, "KUBERNETES_SERVICE_HOST": "10.0.0.1"}).settings == {
        "num_machines": 2,
        "nproc_per_node": 1,
        "machine_rank": 1,
        "main_process_ip": "h",
        "main_process_port": 1,
    }
    assert read_job({**TRAINJOB, "TORCHELASTIC_RUN_ID": "7"}) is None


def test_trainjob_variables_and_their_origins():
    job = read_job(TRAINJOB)
    assert job.settings == {
        "num_machines": 2,
        "machine_rank": 1,
        "main_process_ip": "job-node-0-0.job",
        "main_process_port": 29500,
        "nproc_per_node": 3,
    }
    assert job.origins["machine_rank"] == "PET_NODE_RANK"
    no_rank = {k: v for k, v in TRAINJOB.items() if k != "PET_NODE_RANK"}
    assert read_job(no_rank).origins["machine_rank"] == "JOB_COMPLETION_INDEX"


def test_elastic_endpoint_forms():
    env = {"PET_NNODES": "2:2", "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "[fd00::1]:23456"}
    job = read_job(env)
    assert (job.settings["main_process_ip"], job.settings["main_process_port"]) == (
        "fd00::1",
        23456,
    )
    assert "max_num_machines" not in job.settings  # 2:2 is two machines
    job = read_job({**env, "PET_NNODES": "1:4", "PET_RDZV_ENDPOINT": "job-worker-0"})
    assert job.settings["main_process_port"] == 29400  # torchrun's default
    assert (job.settings["num_machines"], job.settings["max_num_machines"]) == (1, 4)
    with pytest.raises(ConfigError, match="PET_RDZV_ENDPOINT='h:x'"):
        read_job({**env, "PET_RDZV_ENDPOINT": "h:x"})


def test_processes_per_pod_values():
    assert processes_per_pod("4") == (4, "")
    assert processes_per_pod("auto", use_cpu=True) == (1, "use_cpu")
    assert processes_per_pod("cpu")[0] >= 1
    with pytest.raises(ConfigError, match="'0': expected a number >= 1, auto, gpu or cpu"):
        processes_per_pod("0")


def test_the_pod_outranks_the_file_and_yields_to_accel_variables(tmp_path):
    config = tmp_path / "laptop.yaml"
    config.write_text(
        "num_machines: 1\nnum_processes: 1\nmachine_rank: 0\ndistributed_type: 'NO'\n"
    )
    r = resolve(config_file=config, environ=TRAINJOB, check_plugins=False)
    assert (r["num_machines"], r["machine_rank"], r["num_processes"]) == (2, 1, 6)
    assert str(r.source("num_machines")) == "env PET_NNODES"
    assert r["distributed_type"] in ("MULTI_CPU", "MULTI_GPU")
    r = resolve(environ={**TRAINJOB, "ACCEL_NUM_PROCESSES": "4"}, check_plugins=False)
    assert (r["nproc_per_node"], r.source("nproc_per_node").kind) == (2, "derived")


def test_elastic_pod_on_one_machine_is_still_distributed():
    env = {"PET_NNODES": "1:2", "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "h:1"}
    r = resolve(environ={**env, "PET_NPROC_PER_NODE": "1"}, use_config_file=False)
    assert r["distributed_type"] != "NO" and r["max_num_machines"] == 2


def test_what_a_job_of_several_machines_cannot_do_without():
    no_rank = {
        k: v for k, v in TRAINJOB.items() if k not in ("PET_NODE_RANK", "JOB_COMPLETION_INDEX")
    }
    with pytest.raises(ConfigError, match="no PET_NODE_RANK, RANK or JOB_COMPLETION_INDEX"):
        read_job(no_rank)
    assert read_job(no_rank, replaced={"machine_rank"}).settings["num_machines"] == 2
    elastic = {"PET_NNODES": "1:2", "PET_NPROC_PER_NODE": "1"}  # no endpoint, no master
    with pytest.raises(ConfigError, match="no PET_RDZV_ENDPOINT, PET_MASTER_ADDR or MASTER_ADDR"):
        read_job(elastic)
    rendezvous = {**elastic, "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "h:1"}
    assert "machine_rank" not in read_job(rendezvous).settings  # the rendezvous numbers them


@pytest.mark.parametrize(
    ("name", "value"),
    [("PET_MASTER_PORT", "70000"), ("PET_MASTER_PORT", "0"), ("PET_RDZV_ENDPOINT", "h:0")],
)
def test_ports_out_of_range_are_refused(name, value):
    env = {**TRAINJOB, name: value}
    if name == "PET_RDZV_ENDPOINT":
        env["PET_RDZV_BACKEND"] = "c10d"
    with pytest.raises(ConfigError, match=f"{name}='{value}'"):
        read_job(env)


def test_a_flag_replaces_a_bad_pod_variable_without_reading_it():
    bad = {**TRAINJOB, "PET_NNODES": "two", "PET_NPROC_PER_NODE": "many", "PET_MASTER_PORT": "x"}
    with pytest.raises(ConfigError, match="PET_NNODES='two'"):
        resolve(environ=bad, use_config_file=False, check_plugins=False)
    flags = {"num_machines": 2, "nproc_per_node": 1, "main_process_port": 29501}
    r = resolve(environ=bad, flags=flags, use_config_file=False, check_plugins=False)
    assert (r["num_machines"], r["nproc_per_node"], r["main_process_port"]) == (2, 1, 29501)
    assert str(r.source("machine_rank")) == "env PET_NODE_RANK"


# What training-operator v1.9 sets in a pod of an elastic PyTorchJob (ElasticEnvVarGenerator:
# elasticPolicy with minReplicas 1, maxReplicas 3, maxRestarts 5, nProcPerNode 2, rdzvId,
# rdzvConf), Worker replicas only.
ELASTIC = {
    "PYTHONUNBUFFERED": "0",
    "PET_RDZV_ENDPOINT": "job-worker-0:23456",
    "PET_RDZV_BACKEND": "c10d",
    "PET_NNODES": "1:3",
    "PET_MAX_RESTARTS": "5",
    "PET_NPROC_PER_NODE": "2",
    "PET_RDZV_ID": "job-7",
    "PET_RDZV_CONF": "join_timeout=600,last_call_timeout=5",
}


def test_elastic_pod_is_read_like_a_static_one():
    job = read_job(ELASTIC)
    assert job.settings == {
        "num_machines": 1,
        "max_num_machines": 3,
        "rdzv_backend": "c10d",
        "main_process_ip": "job-worker-0",
        "main_process_port": 23456,
        "rdzv_id": "job-7",
        "rdzv_conf": "join_timeout=600,last_call_timeout=5",
        "nproc_per_node": 2,
        "max_restarts": 5,
    }
    assert job.origins["max_num_machines"] == "PET_NNODES"
    assert job.origins["main_process_port"] == "PET_RDZV_ENDPOINT"
    # with a Master replica the operator also sets the static variables: the rendezvous wins
    master = {
        "MASTER_ADDR": "job-master-0",
        "PET_MASTER_ADDR": "job-master-0",
        "MASTER_PORT": "23456",
        "PET_MASTER_PORT": "23456",
        "WORLD_SIZE": "3",
        "RANK": "1",
        "PET_NODE_RANK": "1",
    }
    job = read_job({**ELASTIC, **master})
    assert job.settings["main_process_ip"] == "job-worker-0"
    assert (job.settings["machine_rank"], job.origins["machine_rank"]) == (1, "PET_NODE_RANK")
    # no min/max: PET_NNODES is the Worker replicas, a fixed size over c10d
    job = read_job({**ELASTIC, "PET_NNODES": "2"})
    assert job.settings["num_machines"] == 2 and "max_num_machines" not in job.settings


def test_elastic_pod_gives_an_elastic_torchrun():
    """The pure path from the pod's variables to the agent's argv and environment."""
    from accel.launchers.local import TorchrunLauncher

    resolved = resolve(environ={**ELASTIC, "ACCEL_USE_CPU": "true"}, use_config_file=False)
    config = {**resolved.values, "machine_rank": None}  # the rendezvous numbers the pods
    plan = TorchrunLauncher().plan(config, ["train.py"], {})
    argv = plan.argv[plan.argv.index("--nproc_per_node") : plan.argv.index("--module")]
    assert argv == [
        "--nproc_per_node", "2", "--nnodes", "1:3", "--rdzv_backend", "c10d",
        "--rdzv_endpoint", "job-worker-0:23456", "--rdzv_id", "job-7",
        "--rdzv_conf", "join_timeout=600,last_call_timeout=5", "--max_restarts", "5",
    ]  # fmt: skip
    assert plan.machine_rank is None and resolved["num_processes"] == 2


def test_old_operators_elastic_processes_variable():
    """Older operators (API pytorch/v1) named elasticPolicy.nProcPerNode PET_N_PROC_PER_NODE."""
    old = {k: v for k, v in ELASTIC.items() if k != "PET_NPROC_PER_NODE"}
    job = read_job({**old, "PET_N_PROC_PER_NODE": "4"})
    assert (job.settings["nproc_per_node"], job.origins["nproc_per_node"]) == (
        4,
        "PET_N_PROC_PER_NODE",
    )
    with pytest.raises(ConfigError, match="PET_N_PROC_PER_NODE='x': expected a number"):
        read_job({**old, "PET_N_PROC_PER_NODE": "x"})


def test_standalone_elastic_pod_trains_alone():
    """elasticPolicy.standalone: the operator sets PET_STANDALONE="" (torchrun cannot parse it)."""
    job = read_job({**ELASTIC, "PET_STANDALONE": ""})
    assert job.settings == {"num_machines": 1, "nproc_per_node": 2, "max_restarts": 5}
    assert job.origins["num_machines"] == "PET_STANDALONE"
    assert read_job({**ELASTIC, "PET_STANDALONE": "0"}).settings["max_num_machines"] == 3
