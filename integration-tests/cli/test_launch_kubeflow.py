"""`accel launch` in Kubeflow pods, without machine flags: two "pods" are two real `accel
launch` processes on 127.0.0.1, each given the variables Kubeflow would set for the
manifests of the docs' Kubernetes section (read from the page, so that it cannot drift).

What each operator sets is written out below from their sources: kubeflow/training-operator
v1.9 (pkg/controller.v1/pytorch/envvar.go, master.go, elastic.go and
pkg/apis/kubeflow.org/v1/pytorch_defaults.go) and kubeflow/trainer v2
(pkg/runtime/framework/plugins/torch/torch.go). Host names are mapped to 127.0.0.1 and the
manifests' ports replaced by free ones; nothing else is changed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

DOCS = Path(__file__).parents[2] / "docs"
RANKS = str(Path(__file__).parent / "scripts" / "ranks.py")
MACHINE_FLAGS = (
    "--num_machines", "--nnodes", "--machine_rank", "--node_rank", "--main_process_ip",
    "--master_addr", "--main_process_port", "--master_port", "--num_processes",
    "--nproc_per_node", "--rdzv_backend",
)  # fmt: skip
POD_TIMEOUT = 240

# --------------------------------------------------------------------------- the manifests


def kubernetes_section() -> tuple[Path, str]:
    """The ``## Kubernetes`` section of docs/scaling-out.md."""
    page = DOCS / "scaling-out.md"
    text = page.read_text(encoding="utf-8")
    start = text.find("\n## Kubernetes\n")
    if start < 0:
        pytest.fail("no '## Kubernetes' section in docs/scaling-out.md")
    end = text.find("\n## ", start + 5)
    return page, text[start : end if end >= 0 else len(text)]


def manifests() -> dict[str, dict]:
    """The section's manifests by kind: ``PyTorchJob``, ``PyTorchJob/elastic``, ``TrainJob``."""
    page, text = kubernetes_section()
    found: dict[str, dict] = {}
    for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
        doc = yaml.safe_load(block)
        if isinstance(doc, dict) and doc.get("kind"):
            elastic = "/elastic" if doc["spec"].get("elasticPolicy") else ""
            found[doc["kind"] + elastic] = doc
    assert set(found) == {"PyTorchJob", "PyTorchJob/elastic", "TrainJob"}, (page, sorted(found))
    return found


def _containers(template: dict) -> list[dict]:
    return template["spec"]["containers"]


def _pytorch_container(job: dict, replica_type: str) -> dict:
    spec = job["spec"]["pytorchReplicaSpecs"][replica_type]
    return next(c for c in _containers(spec["template"]) if c["name"] == "pytorch")


def with_port(job: dict, port: int) -> dict:
    """A copy of the PyTorchJob ``job`` whose ``pytorchjob-port`` is ``port``."""
    job = json.loads(json.dumps(job))
    for replica_type in job["spec"]["pytorchReplicaSpecs"]:
        for entry in _pytorch_container(job, replica_type).get("ports", []):
            if entry["name"] == "pytorchjob-port":
                entry["containerPort"] = port
    return job


# --------------------------------------------------------------------------- the operators


def pytorchjob_env(job: dict, replica_type: str, index: int) -> dict[str, str]:
    """The variables training-operator v1.9 sets in pod ``index`` of ``replica_type``."""
    spec, name = job["spec"], job["metadata"]["name"]
    replicas = spec["pytorchReplicaSpecs"]
    elastic = spec.get("elasticPolicy")
    nproc = spec.get("nprocPerNode")
    if nproc is None and not (elastic and elastic.get("nProcPerNode") is not None):
        nproc = "auto"  # setDefaultNprocPerNode

    def port(kind: str) -> int:
        ports = _pytorch_container(job, kind).get("ports", [])
        return next((p["containerPort"] for p in ports if p["name"] == "pytorchjob-port"), 23456)

    env = {e["name"]: str(e["value"]) for e in _pytorch_container(job, replica_type).get("env", [])}
    env["PYTHONUNBUFFERED"] = "1"
    total = sum(int(r.get("replicas", 1)) for r in replicas.values())
    if "Master" in replicas:  # MasterEnvVarGenerator, then WORLD_SIZE / RANK / PET_NODE_RANK
        address, master_port = f"{name}-master-0", str(port("Master"))
        env.update(
            MASTER_PORT=master_port,
            PET_MASTER_PORT=master_port,
            MASTER_ADDR=address,
            PET_MASTER_ADDR=address,
        )
        rank = index + (1 if replica_type == "Worker" else 0)
        per_pod = int(nproc) if str(nproc).isdigit() else 1
        env.update(WORLD_SIZE=str(total * per_pod), RANK=str(rank), PET_NODE_RANK=str(rank))
    if spec.get("nprocPerNode") is not None or nproc == "auto":
        env["PET_NPROC_PER_NODE"] = str(nproc)
    if elastic:  # ElasticEnvVarGenerator, after setElasticPolicy's defaults
        workers = int(replicas["Worker"].get("replicas", 1))
        low = elastic.get("minReplicas", elastic.get("maxReplicas", workers))
        high = elastic.get("maxReplicas", low)
        host = elastic.get("rdzvHost", f"{name}-worker-0")
        env["PET_RDZV_ENDPOINT"] = f"{host}:{elastic.get('rdzvPort', port('Worker'))}"
        env["PET_RDZV_BACKEND"] = elastic.get("rdzvBackend", "c10d")
        env["PET_NNODES"] = f"{low}:{high}"
        if elastic.get("maxRestarts") is not None:
            env["PET_MAX_RESTARTS"] = str(elastic["maxRestarts"])
        if elastic.get("nProcPerNode") is not None:
            env["PET_NPROC_PER_NODE"] = str(elastic["nProcPerNode"])
        if elastic.get("rdzvId"):
            env["PET_RDZV_ID"] = elastic["rdzvId"]
    else:
        env["PET_NNODES"] = str(total)
    return env


def trainjob_env(job: dict, index: int) -> dict[str, str]:
    """The variables Kubeflow Trainer's torch plugin (and the indexed Job) set in node ``index``."""
    name, trainer = job["metadata"]["name"], job["spec"]["trainer"]
    resources = trainer.get("resourcesPerNode") or {}
    limits = {**resources.get("requests", {}), **resources.get("limits", {})}
    nproc = trainer.get("numProcPerNode")
    if nproc is None:  # auto, or the CPU count when the node asks for no GPU
        gpus = any("gpu" in str(k).lower() for k in limits)
        nproc = "auto" if gpus else max(1, int(float(limits.get("cpu", 0))))
    env = {e["name"]: str(e["value"]) for e in trainer.get("env", [])}
    env.update(
        PET_NNODES=str(trainer.get("numNodes", 1)),
        PET_NPROC_PER_NODE=str(nproc),
        PET_NODE_RANK=str(index),  # from the annotation batch.kubernetes.io/job-completion-index
        JOB_COMPLETION_INDEX=str(index),  # the Job controller's, for an indexed Job
        PET_MASTER_ADDR=f"{name}-node-0-0.{name}",
        PET_MASTER_PORT="29500",
    )
    return env


# --------------------------------------------------------------------------- running pods


def loopback(env: dict[str, str], job: dict) -> dict[str, str]:
    """``env`` with the job's host names (``<job>-master-0``, ...) replaced by 127.0.0.1."""
    name = job["metadata"]["name"]
    hosts = re.compile(rf"{re.escape(name)}-(?:master-0|worker-0|node-0-0\.{re.escape(name)})")
    return {k: hosts.sub("127.0.0.1", v) for k, v in env.items()}


def launch_flags(job: dict) -> list[str]:
    """The ``accel launch`` options of the manifest's command (the script and its arguments
    are replaced by the test's script); it must hold no machine flag."""
    if job["kind"] == "TrainJob":
        command = job["spec"]["trainer"]["command"]
    else:
        command = _pytorch_container(job, next(iter(job["spec"]["pytorchReplicaSpecs"])))["command"]
    assert command[:2] == ["accel", "launch"], command
    script = next(i for i, word in enumerate(command) if word.endswith(".py"))
    flags = command[2:script]
    assert not [f for f in flags if f.split("=")[0] in MACHINE_FLAGS], command
    return flags


def run_pods(cli, tmp_path, pod_envs, flags, extra=()):
    """Start one `accel launch` per pod environment; their (returncode, stderr) and records."""
    out = tmp_path / "out"
    out.mkdir()
    procs = []
    for env in pod_envs:
        full = cli.accel_env(tmp_path, **env)
        command = [str(cli.ACCEL), "launch", *flags, *extra, RANKS, str(out)]
        procs.append(
            subprocess.Popen(
                command,
                env=full,
                cwd=str(tmp_path),
                text=True,
                start_new_session=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )  # fmt: skip
        )
    results = []
    try:
        for proc in procs:
            try:
                stdout, stderr = proc.communicate(timeout=POD_TIMEOUT)
            except subprocess.TimeoutExpired:
                pytest.fail(f"a pod's accel launch did not finish in {POD_TIMEOUT} s")
            results.append((proc.returncode, stdout + stderr))
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
    for code, text in results:
        assert code == 0, text[-4000:]
    records = {
        r["rank"]: r for r in (json.loads(p.read_text()) for p in out.glob("rank*-restart0.json"))
    }
    return [text for _, text in results], records


def check_world(records: dict, world: int, per_pod: int) -> None:
    """One process group of ``world`` ranks, ``per_pod`` on each pod, all-reduced across pods."""
    assert sorted(records) == list(range(world)), sorted(records)
    for rank, record in records.items():
        assert record["world"] == world and record["ranks"] == list(range(world))
        assert record["sum"] == world * (world + 1) / 2
        assert record["local_rank"] == rank % per_pod
    pods = {r["group_rank"] for r in records.values()}
    assert pods == set(range(world // per_pod)), pods


def summary(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("accel launch: "))


# --------------------------------------------------------------------------- the pods


@pytest.mark.timeout(POD_TIMEOUT + 60)
def test_pytorchjob_two_processes_per_pod_over_a_laptop_config(cli, tmp_path):
    """The docs' PyTorchJob (nprocPerNode "2", a Master and a Worker): 2 pods x 2 processes.
    A config file written for one machine (num_machines 1) is in the default place: the
    pod's variables win over it."""
    from accel.config.files import save_config_file, standard_config

    save_config_file(standard_config(), tmp_path / "cfg" / "default_config.yaml")
    job = with_port(manifests()["PyTorchJob"], cli.free_port())
    pods = [pytorchjob_env(job, "Master", 0), pytorchjob_env(job, "Worker", 0)]
    assert pods[1]["PET_NPROC_PER_NODE"] == "2" and pods[1]["WORLD_SIZE"] == "4"
    texts, records = run_pods(cli, tmp_path, [loopback(e, job) for e in pods], launch_flags(job))
    check_world(records, world=4, per_pod=2)
    line = summary(texts[1])
    assert line.startswith("accel launch: 2 machines x 2 processes (this is machine 1)"), line
    for shown in (
        "num_machines=2 (env PET_NNODES)",
        "machine_rank=1 (env PET_NODE_RANK)",
        "main_process_ip=127.0.0.1 (env PET_MASTER_ADDR)",
        f"main_process_port={pods[1]['PET_MASTER_PORT']} (env PET_MASTER_PORT)",
        "nproc_per_node=2 (env PET_NPROC_PER_NODE)",
    ):
        assert shown in line, line


@pytest.mark.timeout(POD_TIMEOUT + 60)
def test_pytorchjob_without_nproc_per_node_runs_one_process_per_cpu_pod(cli, tmp_path):
    """The same manifest without nprocPerNode: the operator's default ``auto`` is one process
    on a pod without accelerators; WORLD_SIZE (2) and RANK are the pods'."""
    job = with_port(manifests()["PyTorchJob"], cli.free_port())
    del job["spec"]["nprocPerNode"]
    pods = [pytorchjob_env(job, "Master", 0), pytorchjob_env(job, "Worker", 0)]
    assert pods[0]["PET_NPROC_PER_NODE"] == "auto" and pods[0]["WORLD_SIZE"] == "2"
    texts, records = run_pods(cli, tmp_path, [loopback(e, job) for e in pods], launch_flags(job))
    check_world(records, world=2, per_pod=1)
    line = summary(texts[0])
    assert "(this is machine 0)" in line, line
    assert "nproc_per_node=1 (env PET_NPROC_PER_NODE=auto (no accelerator))" in line, line


@pytest.mark.timeout(POD_TIMEOUT + 60)
def test_elastic_pytorchjob_nnodes_min_max(cli, tmp_path):
    """The docs' elastic PyTorchJob: PET_NNODES=1:2 over c10d at the first worker's address;
    the rendezvous numbers the pods."""
    job = with_port(manifests()["PyTorchJob/elastic"], cli.free_port())
    pods = [pytorchjob_env(job, "Worker", i) for i in (0, 1)]
    assert pods[0]["PET_NNODES"] == "1:2" and "PET_NODE_RANK" not in pods[0]
    assert "MASTER_ADDR" not in pods[0] and pods[0]["PET_RDZV_BACKEND"] == "c10d"
    texts, records = run_pods(cli, tmp_path, [loopback(e, job) for e in pods], launch_flags(job))
    check_world(records, world=2, per_pod=1)
    line = summary(texts[0])
    assert "1-2 machines x 1 process (machine rank from the rendezvous)" in line, line
    for shown in (
        "num_machines=1 (env PET_NNODES)",
        "max_num_machines=2 (env PET_NNODES)",
        "main_process_ip=127.0.0.1 (env PET_RDZV_ENDPOINT)",
        "rdzv_backend=c10d (env PET_RDZV_BACKEND)",
        "max_restarts=3 (env PET_MAX_RESTARTS)",
    ):
        assert shown in line, line


@pytest.mark.timeout(POD_TIMEOUT + 60)
def test_trainjob_with_a_flag_overriding_the_port(cli, tmp_path):
    """The docs' TrainJob (GPUs asked, numProcPerNode unset: ``auto``): 2 nodes x 1 process
    here. Trainer's port is always 29500: a flag replaces it, and the summary says so."""
    job = manifests()["TrainJob"]
    pods = [trainjob_env(job, i) for i in (0, 1)]
    assert pods[1]["PET_NPROC_PER_NODE"] == "auto" and pods[1]["PET_MASTER_PORT"] == "29500"
    port = str(cli.free_port())
    texts, records = run_pods(
        cli, tmp_path, [loopback(e, job) for e in pods], launch_flags(job),
        extra=["--main_process_port", port],
    )  # fmt: skip
    check_world(records, world=2, per_pod=1)
    line = summary(texts[1])
    assert f"rendezvous static at 127.0.0.1:{port}" in line, line
    assert f"main_process_port={port} (flag --main_process_port)" in line, line
    assert "machine_rank=1 (env PET_NODE_RANK)" in line, line


@pytest.mark.timeout(POD_TIMEOUT + 60)
def test_standalone_elastic_pod_runs_alone(run_accel, tmp_path):
    """``elasticPolicy.standalone``: the operator sets PET_STANDALONE="", which torchrun's own
    parser cannot read; accel launch reads it (this pod trains alone) and keeps it from the
    agent."""
    job = manifests()["PyTorchJob/elastic"]
    job["spec"]["elasticPolicy"]["standalone"] = True
    pod = {**pytorchjob_env(job, "Worker", 1), "PET_STANDALONE": "", "PET_NPROC_PER_NODE": "2"}
    out = tmp_path / "out"
    out.mkdir()
    result = run_accel("launch", RANKS, str(out), env=pod, timeout=POD_TIMEOUT)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "num_machines=1 (env PET_STANDALONE)" in summary(result.stderr)
    records = {r["rank"]: r for r in map(json.loads, map(Path.read_text, out.glob("rank*.json")))}
    check_world(records, world=2, per_pod=2)


# --------------------------------------------------------------------------- plans only


def test_a_pod_that_trains_alone_names_one_node_to_the_agent(monkeypatch, tmp_path):
    """torchrun takes an unnamed ``--nnodes`` from ``PET_NNODES``: a standalone agent in an
    elastic pod ("1:2") would wait 30 s per rendezvous round for a second node, in a static
    pod ("2") until the rendezvous times out."""
    job = manifests()["PyTorchJob/elastic"]
    job["spec"]["elasticPolicy"]["standalone"] = True
    pod = {**pytorchjob_env(job, "Worker", 1), "PET_STANDALONE": ""}
    assert pod["PET_NNODES"] == "1:2"
    argv = _plan(monkeypatch, tmp_path, pod)
    assert "--standalone" in argv and _after(argv, "--nnodes") == "1"
    static = pytorchjob_env(manifests()["PyTorchJob"], "Worker", 0)
    argv = _plan(monkeypatch, tmp_path, static, "--num_machines", "1")
    assert "--standalone" in argv and _after(argv, "--nnodes") == "1"


def _plan(monkeypatch, tmp_path, env: dict[str, str], *argv: str) -> list[str]:
    """The torchrun argv `accel launch argv script` would run with the pod variables ``env``."""
    from accel_cli.launch import plan

    for name in [n for n in os.environ if n.startswith(("PET_", "ACCEL_", "TORCHELASTIC_"))]:
        monkeypatch.delenv(name)
    pod_variables = ("WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT", "JOB_COMPLETION_INDEX")
    for name in (*pod_variables, "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path / "cfg"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    script = tmp_path / "train.py"
    script.write_text("")
    return plan([*argv, str(script)])["plan"].argv


def _after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_dry_run_of_an_elastic_pod_shows_the_elastic_torchrun(run_accel, tmp_path):
    """The docs' elastic PyTorchJob, second pod: torchrun --nnodes 1:2 over c10d at the first
    worker, the operator's maxRestarts; no --node_rank (the rendezvous numbers the pods); each
    rendezvous round's workers get a store of their own."""
    script = tmp_path / "train.py"
    script.write_text("")
    pod = pytorchjob_env(manifests()["PyTorchJob/elastic"], "Worker", 1)
    result = run_accel("launch", "--dry_run", str(script), env=pod)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    command = next(line for line in lines if line.startswith("command: "))
    assert command.split(" -m ", 1)[1] == (
        "torch.distributed.run --nproc_per_node 1 --nnodes 1:2 --rdzv_backend c10d "
        "--rdzv_endpoint accel-elastic-worker-0:23456 --rdzv_id accel --max_restarts 3 "
        f"--module accel.launchers.worker --script {script}"
    )
    assert "env: TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" in lines


def test_operators_before_v1_7_world_size_counts_pods(monkeypatch, tmp_path):
    env = {"MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "3", "RANK": "2"}
    env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1"  # every pod has it (never contacted)
    argv = _plan(monkeypatch, tmp_path, env)
    assert [_after(argv, f) for f in ("--nnodes", "--node_rank", "--nproc_per_node")] == [
        "3",
        "2",
        "1",
    ]
    assert _after(argv, "--master_addr") == "job-master-0"


def test_flags_and_accel_variables_override_the_pod(monkeypatch, tmp_path):
    job = manifests()["PyTorchJob"]
    pod = pytorchjob_env(job, "Worker", 0)
    argv = _plan(monkeypatch, tmp_path, pod, "--nproc_per_node", "1")
    assert _after(argv, "--nproc_per_node") == "1" and _after(argv, "--nnodes") == "2"
    argv = _plan(monkeypatch, tmp_path, pod, "--num_processes", "6")  # a total: 3 per pod
    assert _after(argv, "--nproc_per_node") == "3"
    argv = _plan(monkeypatch, tmp_path, {**pod, "ACCEL_MACHINE_RANK": "0"})
    assert _after(argv, "--node_rank") == "0"
    argv = _plan(monkeypatch, tmp_path, pod, "--num_machines", "1")  # this pod runs alone
    assert "--standalone" in argv and "--node_rank" not in argv
    assert _after(argv, "--nproc_per_node") == "2"
    bad = {**pod, "PET_NNODES": "two", "PET_MASTER_PORT": "99999"}  # replaced: never read
    argv = _plan(monkeypatch, tmp_path, bad, "--num_machines", "2", "--main_process_port", "1234")
    assert (_after(argv, "--nnodes"), _after(argv, "--master_port")) == ("2", "1234")


def test_inside_a_torchrun_worker_nothing_is_read(monkeypatch, tmp_path):
    env = {"MASTER_ADDR": "h", "MASTER_PORT": "1", "WORLD_SIZE": "4", "RANK": "3"}
    argv = _plan(monkeypatch, tmp_path, {**env, "TORCHELASTIC_RUN_ID": "x", "PET_NNODES": "2"})
    assert "torch.distributed.run" not in argv  # one process: the script itself
    pod = {**env, "PET_NNODES": "2", "PET_NODE_RANK": "1"}
    assert "torch.distributed.run" in _plan(monkeypatch, tmp_path, pod)


def test_a_lone_process_does_not_see_the_pods_world(run_accel, tmp_path):
    """`--num_machines 1` in a pod of 2: one process, run directly, without WORLD_SIZE/RANK."""
    script = tmp_path / "world.py"
    script.write_text(
        "import os; print('world', os.environ.get('WORLD_SIZE'), os.environ.get('RANK'))"
    )
    pod = pytorchjob_env(manifests()["PyTorchJob"], "Worker", 0)
    result = run_accel(
        "launch", "--num_machines", "1", "--nproc_per_node", "1", str(script), env=pod
    )
    assert result.returncode == 0, result.stderr
    assert "world None None" in result.stdout
    (summary,) = [line for line in result.stderr.splitlines() if "Kubeflow pod:" in line]
    assert summary.startswith("accel launch: 1 machine x 1 process, distributed_type NO")
    assert summary.endswith(  # the settings the pod had, and who decided them here
        "Kubeflow pod: num_machines=1 (flag --num_machines), nproc_per_node=1 (flag --nproc_per_node)"
    )


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PET_NNODES", "two", "PET_NNODES='two': expected a number of machines or MIN:MAX"),
        ("PET_NNODES", "3:1", "1 <= MIN <= MAX"),
        ("PET_NPROC_PER_NODE", "many", "PET_NPROC_PER_NODE='many': expected a number >= 1, auto"),
        ("PET_NODE_RANK", "5", "machine_rank 5 (env PET_NODE_RANK) needs num_machines > 5"),
    ],
)
def test_bad_pod_variables_exit_2_in_one_line(run_accel, tmp_path, name, value, message):
    script = tmp_path / "x.py"
    script.write_text("")
    pod = {**pytorchjob_env(manifests()["PyTorchJob"], "Worker", 0), name: value}
    result = run_accel("launch", "--dry_run", str(script), env=pod)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
