"""The seven trackers and a third-party tracker plugin on 2 real processes, read back through their libraries.

One ``torch.distributed.run`` job (see ``workers/track_worker.py``) trains briefly once per
tracker with ``log_with=<name>``, then once with ``log_with="all"``, each in its own
directory, with a fresh ``HOME`` and no tracker settings in the environment (so the
trackers' offline defaults are what is tested). The tests then read what each library
wrote: ``metric`` = 1 + 0.5 * step at steps 0..3, the loss at the same steps, the
configuration, and exactly one run (made by rank 0).

The worker runs from a copy outside the git checkout: ClearML analyses the git
repository of the script it runs in and ``close()`` waits for that (up to 300 s in a
large, dirty checkout), which is ClearML's behaviour, not what is tested here.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

WORKER = Path(__file__).parent / "workers" / "track_worker.py"

USER_SETUP_PREFIXES = (
    "ACCEL_",
    "WANDB_",
    "COMET_",
    "CLEARML_",
    "TRAINS_",
    "MLFLOW_",
    "DVC_",
    "AIM_",
)
"""Environment variables that could point a tracker at a server: removed for the workers."""

TRACKERS = {
    "tensorboard": "tensorboard",
    "wandb": "wandb",
    "comet_ml": "comet_ml",
    "aim": "aim",
    "mlflow": "mlflow",
    "clearml": "clearml",
    "dvclive": "dvclive",
}
"""Tracker name -> import name of its library."""

INSTALLED = [name for name, module in TRACKERS.items() if importlib.util.find_spec(module)]
STEPS = [0, 1, 2, 3]
METRIC = [1.0 + 0.5 * s for s in STEPS]
CONFIG = {"num_iterations": 2, "learning_rate": 0.01, "loss_function": "MSELoss()"}
JOB_TIMEOUT = 480

pytestmark = pytest.mark.timeout(JOB_TIMEOUT + 60)


def needs(name: str):
    """Skip unless the library of tracker ``name`` is installed."""
    module = TRACKERS[name]
    return pytest.mark.skipif(
        name not in INSTALLED,
        reason=f"{module} is not installed (pip install 'accel-trackers[{name.replace('_', '-')}]')",
    )


def isolated_env(home: Path) -> dict[str, str]:
    """The current environment without tracker/accel settings, with a fresh ``HOME``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(USER_SETUP_PREFIXES)}
    env.pop("NETRC", None)
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        ACCEL_USE_CPU="1",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def run_job(root: Path, *args: str, timeout: float) -> str:
    """Run a copy of the worker on 2 processes in ``root``; its output, or a test failure."""
    script = root / WORKER.name
    shutil.copy(WORKER, script)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "--max_restarts=0",
        str(script),
        *args,
    ]
    log_path = root / "launch.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=isolated_env(root / "home"),
            cwd=root,
            start_new_session=True,  # its own process group: a timeout ends the workers too
        )
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            pytest.fail(f"timed out after {timeout} s\n{log_path.read_text()[-8000:]}")
    output = log_path.read_text()
    if process.returncode != 0:
        pytest.fail(f"exit code {process.returncode}\n{output[-8000:]}")
    return output


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """Run the 2-process worker once for every installed tracker, ``jsonl`` and ``"all"``."""
    root = tmp_path_factory.mktemp("trackers")
    out = root / "out"
    out.mkdir()
    names = [*INSTALLED, "jsonl"]
    started = time.monotonic()
    output = run_job(root, str(out), *names, "--all", timeout=JOB_TIMEOUT)
    print(f"2-process tracker job: {time.monotonic() - started:.0f} s")
    for name in [*names, "all"]:
        assert f"ok {name}" in output, output[-8000:]
    return out


def check_ranks(directory: Path, name: str) -> None:
    """Both ranks finished; only rank 0 tracked."""
    rank0 = json.loads((directory / "rank0.json").read_text())
    rank1 = json.loads((directory / "rank1.json").read_text())
    assert rank0["steps"] == rank1["steps"] == len(STEPS)
    assert name in rank0["trackers"] and rank1["trackers"] == []


def check_config(config: dict) -> None:
    for key, value in CONFIG.items():
        got = config[key]
        if isinstance(value, (int, float)) and not isinstance(got, (int, float)):
            got = float(got)
        assert got == value, (key, got, value)


# -- readers: each reads what the real library wrote, through its own API or files ---------
def read_tensorboard(directory: Path) -> tuple[dict, dict, int]:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams import plugin_data_pb2

    runs = [directory / "accel_test"]  # <logging_dir>/<project name>
    scalars: dict[str, dict[int, float]] = {}
    hparams: dict = {}
    writers = set()
    for path in sorted(glob.glob(str(runs[0] / "events.out.tfevents.*"))):
        for event in EventFileLoader(path).Load():
            for value in event.summary.value:
                plugin = value.metadata.plugin_data.plugin_name
                if plugin == "scalars" or value.HasField("simple_value"):
                    writers.add(path)
                    number = value.simple_value if value.HasField("simple_value") else None
                    if number is None:
                        from tensorboard.util import tensor_util

                        number = float(tensor_util.make_ndarray(value.tensor))
                    scalars.setdefault(value.tag, {})[event.step] = number
                elif plugin == "hparams":
                    data = plugin_data_pb2.HParamsPluginData.FromString(
                        value.metadata.plugin_data.content
                    )
                    if data.HasField("session_start_info"):
                        for key, v in data.session_start_info.hparams.items():
                            hparams[key] = (
                                v.number_value if v.HasField("number_value") else v.string_value
                            )
    return scalars, hparams, len(writers)


def read_wandb_records(path: str) -> list:
    """The protobuf records of a ``.wandb`` file (W&B's LevelDB-style log: 32 KiB blocks, 7-byte headers)."""
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", data[:8]
    block, header = 32768, 7
    pos, pending, records = 7, b"", []
    while pos + header <= len(data):
        left = block - pos % block
        if left < header:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + header])
        if length == 0 and kind == 0:
            pos += left
            continue
        chunk = data[pos + header : pos + header + length]
        pos += header + length
        if kind == 1:
            records.append(chunk)
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind == 4:
            records.append(pending + chunk)
            pending = b""
    parsed = []
    for raw in records:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        parsed.append(record)
    return parsed


def _key(item) -> str:
    """The key of a W&B record item (``key``, or ``nested_key`` parts joined with ``/``)."""
    return item.key or "/".join(item.nested_key)


def metric_table(rows: list[tuple[str, int, float]]) -> dict[str, dict[int, float]]:
    table: dict[str, dict[int, float]] = {}
    for key, step, value in rows:
        table.setdefault(key, {})[step] = value
    return table


def check_metrics(table: dict[str, dict[int, float]]) -> None:
    assert table["metric"] == dict(zip(STEPS, METRIC)), table.get("metric")
    assert sorted(table["training_loss"]) == STEPS
    assert all(v > 0 for v in table["training_loss"].values())


# -- the tests ---------------------------------------------------------------------------------
@needs("tensorboard")
def test_tensorboard(job):
    directory = job / "tensorboard"
    check_ranks(directory, "tensorboard")
    scalars, hparams, writers = read_tensorboard(directory)
    check_metrics(scalars)
    check_config(hparams)
    assert hparams["nested/depth"] == 2
    assert writers == 1


@needs("wandb")
def test_wandb(job):
    directory = job / "wandb"
    check_ranks(directory, "wandb")
    runs = glob.glob(str(directory / "wandb" / "offline-run-*"))
    assert len(runs) == 1, runs  # offline by default, and only rank 0 made a run
    (path,) = glob.glob(str(Path(runs[0]) / "run-*.wandb"))
    rows, config = [], {}
    project = None
    for record in read_wandb_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            project = record.run.project
            config.update({_key(i): json.loads(i.value_json) for i in record.run.config.update})
        elif kind == "config":
            config.update({_key(i): json.loads(i.value_json) for i in record.config.update})
        elif kind == "history":
            items = {_key(i): json.loads(i.value_json) for i in record.history.item}
            for key in ("metric", "training_loss"):
                if key in items:
                    rows.append((key, items["_step"], items[key]))
    assert project == "accel_test"
    check_metrics(metric_table(rows))
    check_config(config)
    assert config["nested"] == {"depth": 2}


@needs("comet_ml")
def test_comet_ml(job):
    directory = job / "comet_ml"
    check_ranks(directory, "comet_ml")
    archives = glob.glob(str(directory / ".cometml-runs" / "*.zip"))
    assert len(archives) == 1, archives  # an OfflineExperiment by default
    with zipfile.ZipFile(archives[0]) as archive:
        experiment = json.loads(archive.read("experiment.json"))
        messages = [json.loads(line) for line in archive.read("messages.json").splitlines()]
    assert experiment["project_name"] == "accel_test"
    rows, params = [], {}
    for message in messages:
        payload = message["payload"]
        if message["type"] == "metric_msg":
            metric = payload["metric"]
            rows.append((metric["metricName"], metric["step"], float(metric["metricValue"])))
        elif message["type"] == "parameter_msg" and payload["param"]["source"] == "manual":
            params[payload["param"]["paramName"]] = payload["param"]["paramValue"]
    check_metrics(metric_table(rows))
    check_config(params)


@needs("aim")
def test_aim(job):
    import aim
    from aim.sdk.index_manager import RepoIndexManager

    directory = job / "aim"
    check_ranks(directory, "aim")
    repo = aim.Repo.from_path(str(directory))
    hashes = repo.list_all_runs()
    assert len(hashes) == 1, hashes
    RepoIndexManager(repo).index(hashes[0])  # what `aim up` does in the background
    repo = aim.Repo.from_path(str(directory))
    (run,) = list(repo.iter_runs())
    assert run.experiment == "accel_test"
    check_config(run["hparams"])
    rows = []
    for metric in run.metrics():
        if metric.name in ("metric", "training_loss"):
            steps, (values, *_rest) = metric.data.numpy()
            rows += [(metric.name, int(s), float(v)) for s, v in zip(steps, values)]
    check_metrics(metric_table(rows))


@needs("mlflow")
def test_mlflow(job):
    from mlflow import MlflowClient

    directory = job / "mlflow"
    check_ranks(directory, "mlflow")
    assert (directory / "mlflow.db").is_file()  # the local SQLite default
    client = MlflowClient(tracking_uri=f"sqlite:///{directory / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("accel_test")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1, runs
    run = runs[0]
    assert run.info.status == "FINISHED"
    rows = [
        (key, m.step, m.value)
        for key in ("metric", "training_loss")
        for m in client.get_metric_history(run.info.run_id, key)
    ]
    check_metrics(metric_table(rows))
    check_config(run.data.params)
    assert run.data.params["nested/depth"] == "2"


@needs("clearml")
def test_clearml(job):
    directory = job / "clearml"
    check_ranks(directory, "clearml")
    folder = Path(json.loads((directory / "rank0.json").read_text())["clearml_folder"])
    # offline by default, in ClearML's cache under HOME: one session per phase of the job
    offline = job.parent / "home" / ".clearml" / "cache" / "offline"
    assert folder.parent == offline
    assert len([p for p in offline.iterdir() if p.is_dir()]) == 1 + ("clearml" in INSTALLED)
    assert (offline / f"{folder.name}.zip").is_file()
    task = json.loads((folder / "task.json").read_text())
    rows = []
    for line in (folder / "metrics.jsonl").read_text().splitlines():
        for event in json.loads(line):
            if event.get("type") == "training_stats_scalar":
                rows.append((event["metric"], event["iter"], event["value"]))
    check_metrics(metric_table(rows))
    # the configuration is the task's configuration object (Task.connect_configuration), in HOCON
    from clearml.utilities.pyhocon import ConfigFactory

    check_config(ConfigFactory.parse_string(task["configuration"]["General"]["value"]))
    assert task["name"] == "accel_test"


@needs("dvclive")
def test_dvclive(job):
    import yaml

    directory = job / "dvclive"
    check_ranks(directory, "dvclive")
    live = directory / "dvclive"
    rows = []
    for key in ("metric", "training_loss"):
        lines = (live / "plots" / "metrics" / f"{key}.tsv").read_text().splitlines()
        assert lines[0] == f"step\t{key}"
        rows += [(key, int(s), float(v)) for s, v in (line.split("\t") for line in lines[1:])]
    check_metrics(metric_table(rows))
    check_config(yaml.safe_load((live / "params.yaml").read_text()))
    assert json.loads((live / "metrics.json").read_text())["metric"] == METRIC[-1]


def test_third_party_plugin(job):
    """accel-tracker-example, its own distribution, registers ``jsonl`` through the entry points."""
    directory = job / "jsonl"
    check_ranks(directory, "jsonl")
    records = [
        json.loads(line) for line in (directory / "accel_test.jsonl").read_text().splitlines()
    ]
    assert records[0]["event"] == "config" and records[0]["values"]["learning_rate"] == 0.01
    logs = [r for r in records if r["event"] == "log"]
    assert [r["step"] for r in logs] == STEPS
    assert [r["values"]["metric"] for r in logs] == METRIC
    assert records[-1] == {"event": "finish"}
    assert [p.name for p in directory.glob("*.jsonl")] == ["accel_test.jsonl"]


def test_all_installed_trackers(job):
    """``log_with="all"``: every tracker whose library is installed, plus the plugin's, one run each."""
    directory = job / "all"
    rank0 = json.loads((directory / "rank0.json").read_text())
    assert sorted(rank0["trackers"]) == sorted([*INSTALLED, "jsonl"])
    assert json.loads((directory / "rank1.json").read_text())["trackers"] == []
    if "tensorboard" in INSTALLED:
        check_metrics(read_tensorboard(directory)[0])
    if "wandb" in INSTALLED:
        assert len(glob.glob(str(directory / "wandb" / "offline-run-*"))) == 1
    if "comet_ml" in INSTALLED:
        assert len(glob.glob(str(directory / ".cometml-runs" / "*.zip"))) == 1
    if "mlflow" in INSTALLED:
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=f"sqlite:///{directory / 'mlflow.db'}")
        experiment = client.get_experiment_by_name("accel_test")
        assert len(client.search_runs([experiment.experiment_id])) == 1
    if "dvclive" in INSTALLED:
        assert (directory / "dvclive" / "metrics.json").is_file()
    assert len((directory / "accel_test.jsonl").read_text().splitlines()) == 1 + len(STEPS) + 1
