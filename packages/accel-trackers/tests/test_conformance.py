"""accel-trackers runs the tracker conformance kit for every tracker whose library is installed.

One 2-process job (torchrun, gloo) tracks once per installed tracker, offline, with a fresh
``HOME``; each test reads back what the tracker's own library wrote.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import struct
import zipfile
from pathlib import Path
from typing import Any

from accel.testing import TrackerConformance

LIBRARIES = {
    "tensorboard": "tensorboard",
    "wandb": "wandb",
    "comet_ml": "comet_ml",
    "aim": "aim",
    "mlflow": "mlflow",
    "dvclive": "dvclive",
    "clearml": "clearml",
}
"""Tracker name -> import name of its library."""
INSTALLED = tuple(n for n, m in LIBRARIES.items() if importlib.util.find_spec(m))


def _table(rows: list[tuple[str, int, float]]) -> dict[str, dict[int, float]]:
    table: dict[str, dict[int, float]] = {}
    for key, step, value in rows:
        table.setdefault(key, {})[int(step)] = float(value)
    return table


def read_tensorboard(directory: Path, home: Path) -> list[dict[str, Any]]:
    """One run per event-file folder under the logging directory."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams import plugin_data_pb2
    from tensorboard.util import tensor_util

    folders = sorted(
        {
            Path(p).parent
            for p in glob.glob(str(directory / "**" / "events.out.tfevents.*"), recursive=True)
        }
    )
    runs = []
    for folder in folders:
        rows, config = [], {}
        for path in sorted(folder.glob("events.out.tfevents.*")):
            for event in EventFileLoader(str(path)).Load():
                for value in event.summary.value:
                    plugin = value.metadata.plugin_data.plugin_name
                    if plugin == "hparams":
                        data = plugin_data_pb2.HParamsPluginData.FromString(
                            value.metadata.plugin_data.content
                        )
                        if data.HasField("session_start_info"):
                            for key, v in data.session_start_info.hparams.items():
                                config[key] = (
                                    v.number_value if v.HasField("number_value") else v.string_value
                                )
                    elif value.HasField("simple_value"):
                        rows.append((value.tag, event.step, value.simple_value))
                    elif plugin == "scalars":
                        rows.append(
                            (value.tag, event.step, float(tensor_util.make_ndarray(value.tensor)))
                        )
        if rows:
            runs.append({"config": config, "scalars": _table(rows)})
    return runs


def _wandb_records(path: str) -> list:
    """The protobuf records of a ``.wandb`` file (32 KiB blocks, 7-byte record headers)."""
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    block, header = 32768, 7
    pos, pending, raw = 7, b"", []
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
            raw.append(chunk)
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind == 4:
            raw.append(pending + chunk)
            pending = b""
    records = []
    for item in raw:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(item)
        records.append(record)
    return records


def read_wandb(directory: Path, home: Path) -> list[dict[str, Any]]:
    """One run per ``offline-run-*`` folder (W&B's offline default)."""
    runs = []
    for folder in glob.glob(str(directory / "wandb" / "offline-run-*")):
        rows, config = [], {}
        for path in glob.glob(str(Path(folder) / "run-*.wandb")):
            for record in _wandb_records(path):
                kind = record.WhichOneof("record_type")
                updates = []
                if kind == "run":
                    updates = record.run.config.update
                elif kind == "config":
                    updates = record.config.update
                elif kind == "history":
                    items = {
                        i.key or "/".join(i.nested_key): json.loads(i.value_json)
                        for i in record.history.item
                    }
                    rows += [
                        (k, items["_step"], v) for k, v in items.items() if not k.startswith("_")
                    ]
                config.update(
                    {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in updates}
                )
        runs.append({"config": config, "scalars": _table(rows)})
    return runs


def read_comet_ml(directory: Path, home: Path) -> list[dict[str, Any]]:
    """One run per offline experiment archive."""
    runs = []
    for archive_path in glob.glob(str(directory / ".cometml-runs" / "*.zip")):
        with zipfile.ZipFile(archive_path) as archive:
            messages = [json.loads(line) for line in archive.read("messages.json").splitlines()]
        rows, config = [], {}
        for message in messages:
            payload = message["payload"]
            if message["type"] == "metric_msg":
                metric = payload["metric"]
                rows.append((metric["metricName"], metric["step"], float(metric["metricValue"])))
            elif message["type"] == "parameter_msg" and payload["param"]["source"] == "manual":
                config[payload["param"]["paramName"]] = payload["param"]["paramValue"]
        runs.append({"config": config, "scalars": _table(rows)})
    return runs


def read_aim(directory: Path, home: Path) -> list[dict[str, Any]]:
    """Every run of the Aim repository in the logging directory."""
    import aim
    from aim.sdk.index_manager import RepoIndexManager

    repo = aim.Repo.from_path(str(directory))
    hashes = repo.list_all_runs()
    for run_hash in hashes:
        RepoIndexManager(repo).index(run_hash)  # what `aim up` does in the background
    repo = aim.Repo.from_path(str(directory))
    runs = []
    for run in repo.iter_runs():
        rows = []
        for metric in run.metrics():
            steps, (values, *_rest) = metric.data.numpy()
            rows += [(metric.name, int(s), float(v)) for s, v in zip(steps, values)]
        runs.append({"config": dict(run["hparams"]), "scalars": _table(rows)})
    return runs


def read_mlflow(directory: Path, home: Path) -> list[dict[str, Any]]:
    """Every finished run of the local SQLite store (MLflow's default), in the project's experiment."""
    from mlflow import MlflowClient

    database = directory / "mlflow.db"
    if not database.is_file():
        return []
    client = MlflowClient(tracking_uri=f"sqlite:///{database}")
    experiment = client.get_experiment_by_name(TrackerConformance.PROJECT)
    runs = []
    for run in client.search_runs([experiment.experiment_id]) if experiment else []:
        assert run.info.status == "FINISHED", run.info.status  # end_training closed it
        rows = [
            (key, m.step, m.value)
            for key in run.data.metrics
            for m in client.get_metric_history(run.info.run_id, key)
        ]
        runs.append({"config": dict(run.data.params), "scalars": _table(rows)})
    return runs


def read_dvclive(directory: Path, home: Path) -> list[dict[str, Any]]:
    """The ``dvclive/`` folder's plots and params (one run per folder)."""
    import yaml

    runs = []
    for live in glob.glob(str(directory / "**" / "dvclive"), recursive=True):
        rows = []
        for tsv in Path(live).glob("plots/metrics/*.tsv"):
            lines = tsv.read_text().splitlines()
            rows += [
                (tsv.stem, int(s), float(v)) for s, v in (line.split("\t") for line in lines[1:])
            ]
        params = Path(live) / "params.yaml"
        config = yaml.safe_load(params.read_text()) if params.is_file() else {}
        runs.append({"config": config, "scalars": _table(rows)})
    return runs


def read_clearml(directory: Path, home: Path) -> list[dict[str, Any]]:
    """One run per offline session in ClearML's cache under ``HOME``."""
    offline = home / ".clearml" / "cache" / "offline"
    runs = []
    for folder in sorted(p for p in offline.glob("*") if p.is_dir()):
        task = json.loads((folder / "task.json").read_text())
        if task.get("name") != TrackerConformance.PROJECT:
            continue
        rows = []
        metrics = folder / "metrics.jsonl"
        for line in metrics.read_text().splitlines() if metrics.is_file() else []:
            for event in json.loads(line):
                if event.get("type") == "training_stats_scalar":
                    rows.append((event["metric"], event["iter"], event["value"]))
        # the task's configuration object (Task.connect_configuration), in HOCON
        from clearml.utilities.pyhocon import ConfigFactory

        general = task.get("configuration", {}).get("General", {}).get("value", "")
        config = dict(ConfigFactory.parse_string(general)) if general else {}
        runs.append({"config": config, "scalars": _table(rows)})
    return runs


READERS = {
    "tensorboard": read_tensorboard,
    "wandb": read_wandb,
    "comet_ml": read_comet_ml,
    "aim": read_aim,
    "mlflow": read_mlflow,
    "dvclive": read_dvclive,
    "clearml": read_clearml,
}


class TestInstalledTrackersConformance(TrackerConformance):
    """Every tracker of accel-trackers whose library is installed, offline, in one job."""

    tracker_names = INSTALLED
    cleared_prefixes = ("WANDB_", "COMET_", "CLEARML_", "TRAINS_", "MLFLOW_", "DVC_", "AIM_")

    def read_runs(self, name: str, directory: Path, home: Path) -> list[dict[str, Any]]:
        """Read back through the library of tracker ``name``."""
        return READERS[name](directory, home)
