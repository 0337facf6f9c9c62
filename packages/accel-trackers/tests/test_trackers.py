"""Each tracker in one process: values of every kind, steps, images and tables, read back from its files.

The 2-process runs (one run per job, scalars and configuration read back) are in
``integration-tests/trackers``.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from accel import Accelerator
from accel.utils import ProjectConfiguration

pytestmark = pytest.mark.timeout(180)

IMAGE = torch.rand(8, 8, 3)
CONFIG = {"lr": 0.1, "layers": [1, 2], "nested": {"a": 1}, "loss_function": torch.nn.MSELoss()}


def needs(module: str, extra: str | None = None):
    """Skip unless the tracking library ``module`` is installed."""
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None,
        reason=f"{module} is not installed (pip install 'accel-trackers[{extra or module}]')",
    )


def run_tracker(name: str, workdir: Path, **accelerator_kwargs) -> Accelerator:
    """Log a config, steps 0 and 5 (tensor, float, int, str), step None, images and a table."""
    accelerator = Accelerator(
        cpu=True, log_with=name, project_dir=str(workdir), **accelerator_kwargs
    )
    accelerator.init_trackers("proj", config=CONFIG)
    accelerator.log({"loss": torch.tensor(0.5), "acc": 0.25, "count": 3}, step=0)
    accelerator.log({"loss": torch.tensor(0.125), "acc": 0.75, "note": "hello", "count": 4}, step=5)
    tracker = accelerator.get_tracker(name)
    assert accelerator.get_tracker(name, unwrap=True) is tracker.tracker is not None
    if hasattr(tracker, "log_images"):
        tracker.log_images({"img": IMAGE}, step=5)
    if hasattr(tracker, "log_table"):
        tracker.log_table("tab", columns=["a", "b"], data=[[1, 2], [3, 4]], step=5)
    accelerator.log({"final": 1.0})
    accelerator.end_training()
    return accelerator


@needs("tensorboard")
def test_tensorboard(workdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_tracker("tensorboard", workdir)
    events = EventAccumulator(str(workdir / "proj"), size_guidance={"images": 0, "scalars": 0})
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("loss")] == [(0, 0.5), (5, 0.125)]
    assert [(e.step, e.value) for e in events.Scalars("count")] == [(0, 3.0), (5, 4.0)]
    assert [e.step for e in events.Images("img")] == [5]
    tags = events.Tags()["tensors"]
    assert "config/text_summary" in tags and "note/text_summary" in tags


@needs("wandb")
def test_wandb(workdir):
    run_tracker("wandb", workdir)
    (run,) = glob.glob(str(workdir / "wandb" / "offline-run-*"))
    assert glob.glob(os.path.join(run, "files", "media", "images", "img_5_*.png"))
    assert glob.glob(os.path.join(run, "files", "media", "table", "tab_5_*.table.json"))


def test_wandb_custom_tracker_from_the_user_guide(workdir):
    """The guide's custom tracker (made runnable: offline run, ``self.run`` set, ``config.update``)."""
    pytest.importorskip(
        "wandb", reason="wandb is not installed (pip install 'accel-trackers[wandb]')"
    )

    import wandb
    from accel.tracking import GeneralTracker, on_main_process

    class MyCustomTracker(GeneralTracker):
        name = "wandb"
        requires_logging_directory = False

        @on_main_process
        def __init__(self, run_name: str):
            self.run_name = run_name
            self.run = wandb.init(project=self.run_name, mode="offline", dir=str(workdir))

        @property
        def tracker(self):
            return self.run

        @on_main_process
        def store_init_configuration(self, values: dict):
            self.run.config.update(values)

        @on_main_process
        def log(self, values: dict, step: int | None = None):
            self.run.log(values, step=step)

    tracker = MyCustomTracker("some_run_name")
    accelerator = Accelerator(cpu=True, log_with=tracker)
    accelerator.init_trackers("ignored", config={"lr": 0.1})
    accelerator.log({"loss": 1.0}, step=1)
    assert accelerator.get_tracker("wandb") is tracker
    assert accelerator.get_tracker("wandb", unwrap=True) is tracker.run
    accelerator.end_training()
    tracker.run.finish()
    assert len(glob.glob(str(workdir / "wandb" / "offline-run-*"))) == 1


def test_custom_tracker_mixed_with_all(workdir, monkeypatch):
    """``log_with=[tracker, "all"]`` (here "all" is the example plugin's ``jsonl`` alone)."""
    from accel.plugins import reset_plugin_manager
    from accel.tracking import GeneralTracker

    class ListTracker(GeneralTracker):
        name = "mine"
        requires_logging_directory = False

        def __init__(self):
            super().__init__()
            self.calls = []

        @property
        def tracker(self):
            return self.calls

        def store_init_configuration(self, values):
            self.calls.append(("config", values))

        def log(self, values, step=None, **kwargs):
            self.calls.append(("log", step, values))

    monkeypatch.setenv("ACCEL_PLUGINS", "jsonl_tracker")
    reset_plugin_manager()
    try:
        tracker = ListTracker()
        accelerator = Accelerator(cpu=True, log_with=[tracker, "all"], project_dir=str(workdir))
        accelerator.init_trackers("proj", config={"a": 1})
        accelerator.log({"x": 2}, step=7)
        assert [t.name for t in accelerator.trackers] == ["mine", "jsonl"]
        accelerator.end_training()
    finally:
        monkeypatch.delenv("ACCEL_PLUGINS")
        reset_plugin_manager()
    assert tracker.calls == [("config", {"a": 1}), ("log", 7, {"x": 2})]
    lines = (workdir / "proj.jsonl").read_text().splitlines()
    assert json.loads(lines[1]) == {"event": "log", "step": 7, "values": {"x": 2}}


@needs("comet_ml", "comet-ml")
def test_comet_ml(workdir):
    run_tracker("comet_ml", workdir)
    (archive,) = glob.glob(str(workdir / ".cometml-runs" / "*.zip"))
    with zipfile.ZipFile(archive) as zf:
        messages = [json.loads(line) for line in zf.read("messages.json").splitlines()]
    metrics = {
        (m["payload"]["metric"]["metricName"], m["payload"]["metric"]["step"]): float(
            m["payload"]["metric"]["metricValue"]
        )
        for m in messages
        if m["type"] == "metric_msg"
    }
    assert metrics[("loss", 0)] == 0.5 and metrics[("loss", 5)] == 0.125
    assert [v for (k, _step), v in metrics.items() if k == "final"] == [1.0]
    others = {
        m["payload"]["key"]: m["payload"]["value"] for m in messages if m["type"] == "log_other"
    }
    assert others["note"] == "hello"
    uploads = [m for m in messages if m["type"] in ("file_upload", "remote_file", "3d_points")]
    assert any('"figName": "img"' in json.dumps(m) for m in uploads), uploads
    assert any("tab.csv" in json.dumps(m) for m in uploads), uploads


@needs("aim")
def test_aim(workdir):
    import aim
    from aim.sdk.index_manager import RepoIndexManager

    run_tracker("aim", workdir)
    repo = aim.Repo.from_path(str(workdir))
    (run_hash,) = repo.list_all_runs()
    RepoIndexManager(repo).index(run_hash)
    (run,) = list(aim.Repo.from_path(str(workdir)).iter_runs())
    assert run.name == "proj"  # named after init_trackers' project name, as in Accelerate
    assert run["hparams"]["nested"] == {"a": 1} and run["hparams"]["loss_function"] == "MSELoss()"
    data = {m.name: m.data.numpy() for m in run.metrics()}
    steps, (values, *_rest) = data["loss"]
    assert list(steps) == [0, 5] and list(values) == [0.5, 0.125]
    from aim.storage.context import Context

    images = run.get_image_sequence("img", Context({}))
    assert images is not None and list(images.data.numpy()[0]) == [5]
    _steps, (final, *_rest) = data["final"]
    assert list(final) == [1.0]  # step=None: tracked at Aim's next step


@needs("mlflow")
def test_mlflow(workdir):
    from mlflow import MlflowClient

    run_tracker("mlflow", workdir, project_config=ProjectConfiguration(project_dir=str(workdir)))
    client = MlflowClient(tracking_uri=f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("proj")
    (run,) = client.search_runs([experiment.experiment_id])
    history = client.get_metric_history(run.info.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(0, 0.5), (5, 0.125)]
    assert run.data.params["nested/a"] == "1" and run.data.params["layers"] == "[1, 2]"
    assert run.data.tags["note"] == "hello"
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert "tab.json" in artifacts and any(p.startswith("images") for p in artifacts), artifacts


@needs("dvclive")
def test_dvclive(workdir):
    import yaml

    accelerator = run_tracker("dvclive", workdir)
    (tracker,) = accelerator.trackers  # still there after end_training, as in Accelerate
    assert tracker.name == "dvclive" and tracker.live is tracker.tracker
    live = workdir / "dvclive"  # ./dvclive, or <project_dir>/dvclive when the Accelerator passes it
    lines = (live / "plots" / "metrics" / "loss.tsv").read_text().splitlines()
    assert lines == ["step\tloss", "0\t0.5", "5\t0.125"]
    params = yaml.safe_load((live / "params.yaml").read_text())
    assert params["nested"] == {"a": 1} and params["loss_function"] == "MSELoss()"
    assert (live / "plots" / "images" / "img.png").is_file()


CLEARML_SCRIPT = """
import json, sys, torch
from accel import Accelerator
accelerator = Accelerator(cpu=True, log_with="clearml")
accelerator.init_trackers("proj", config={"lr": 0.1, "nested": {"a": 1}})
accelerator.log({"loss": torch.tensor(0.5), "eval_acc": 0.25, "test/acc": 0.5}, step=0)
accelerator.log({"train_loss": 0.125, "note": "hello"}, step=5)
accelerator.log({"final": 1.0})
tracker = accelerator.get_tracker("clearml")
tracker.log_images({"samples/img": torch.rand(8, 8, 3)}, step=5)
tracker.log_table("tab", columns=["a", "b"], data=[[1, 2], [3, 4]], step=5)
tracker.log_table("eval_rows", data=[["x", "y"], [5, 6]], step=6)  # first row: the header
try:
    tracker.log_table("empty")
except ValueError as exc:
    print("NO DATA", exc)
folder = str(tracker.tracker.get_offline_mode_folder())
accelerator.end_training()
assert accelerator.trackers == [tracker]  # still there after end_training, as in Accelerate
print("FOLDER", folder)
"""


@needs("clearml")
def test_clearml(workdir):
    """In a subprocess: ClearML installs process-wide hooks the test process should not keep."""
    result = subprocess.run(
        [sys.executable, "-c", CLEARML_SCRIPT],
        capture_output=True,
        text=True,
        timeout=150,
        cwd=workdir,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("FOLDER ")]
    folder = Path(line.split(" ", 1)[1])
    assert folder.parent == Path(os.environ["HOME"]) / ".clearml" / "cache" / "offline"
    events = [
        e
        for chunk in (folder / "metrics.jsonl").read_text().splitlines()
        for e in json.loads(chunk)
    ]
    scalars = {
        (e["metric"], e["variant"], e["iter"]): e["value"]
        for e in events
        if e["type"] == "training_stats_scalar"
    }
    single = [
        v for (title, name, _i), v in scalars.items() if title == "Summary" and name == "final"
    ]
    assert single == [1.0]  # step=None: a single value
    assert {k: v for k, v in scalars.items() if k[0] != "Summary"} == {
        ("loss", "train", 0): 0.5,  # no prefix: the train series
        ("acc", "eval", 0): 0.25,  # eval_acc
        ("acc", "test", 0): 0.5,  # test/acc
        ("loss", "train", 5): 0.125,  # train_loss
    }
    kinds = {e["type"] for e in events}
    assert "training_debug_image" in kinds, kinds
    tables = {
        (e["metric"], e["variant"], e["iter"]): json.loads(e["plot_str"])["data"][0]
        for e in events
        if e["type"] == "plot"
    }
    assert tables["tab", "train", 5]["header"]["values"] == ["a", "b"]
    assert tables["tab", "train", 5]["cells"]["values"] == [[1, 3], [2, 4]]
    assert tables["rows", "eval", 6]["header"]["values"] == ["x", "y"]
    assert tables["rows", "eval", 6]["cells"]["values"] == [[5], [6]]
    assert "NO DATA" in result.stdout
    task = json.loads((folder / "task.json").read_text())
    # the task's configuration object (Task.connect_configuration), not hyperparameters
    assert task.get("hyperparams", {}).get("General") is None
    from clearml.utilities.pyhocon import ConfigFactory

    configuration = ConfigFactory.parse_string(task["configuration"]["General"]["value"])
    assert configuration["lr"] == 0.1 and configuration["nested"]["a"] == 1


@needs("dvclive")
def test_dvclive_live_is_created_by_init_trackers_and_logged_through(workdir):
    """``init_trackers`` creates the ``Live`` (with its init kwargs); ``log`` goes through it."""
    import dvclive

    accelerator = Accelerator(cpu=True, log_with="dvclive")
    accelerator.init_trackers(
        "proj", init_kwargs={"dvclive": {"dir": "out", "save_dvc_exp": False}}
    )
    live = accelerator.get_tracker("dvclive", unwrap=True)
    assert isinstance(live, dvclive.Live) and Path(live.dir) == Path("out")
    accelerator.log({"loss": 0.5}, step=3)
    assert live.step == 4  # set to 3, then next_step()
    assert (workdir / "out" / "plots" / "metrics" / "loss.tsv").read_text().splitlines() == [
        "step\tloss",
        "3\t0.5",
    ]
    accelerator.end_training()

    mine = dvclive.Live(dir="mine", save_dvc_exp=False)
    from accel_trackers import DVCLiveTracker

    accelerator = Accelerator(cpu=True, log_with=DVCLiveTracker(live=mine))
    accelerator.init_trackers("proj")
    assert accelerator.get_tracker("dvclive", unwrap=True) is mine
    accelerator.log({"acc": 1.0}, step=0)
    accelerator.end_training()
    assert (workdir / "mine" / "plots" / "metrics" / "acc.tsv").is_file()


def test_end_training_keeps_the_trackers(workdir):
    """Scripts read ``accelerator.trackers`` after ``end_training()`` (as with Accelerate)."""
    from accel.tracking import GeneralTracker

    class Recording(GeneralTracker):
        name = "recording"
        requires_logging_directory = False

        def __init__(self):
            super().__init__()
            self.finished = 0

        @property
        def tracker(self):
            return self

        def log(self, values, step=None, **kwargs):
            pass

        def finish(self):
            self.finished += 1

    recording = Recording()
    accelerator = Accelerator(cpu=True, log_with=recording)
    accelerator.init_trackers("proj")
    accelerator.end_training()
    assert accelerator.trackers == [recording] and recording.finished == 1
    assert accelerator.get_tracker("recording") is recording


@needs("dvclive")
def test_dvclive_log_keeps_string_values(workdir, caplog):
    """Strings reach ``log_metric`` as in Accelerate; values DVCLive cannot log are dropped with a warning."""
    import dvclive
    from accel_trackers import DVCLiveTracker

    live = dvclive.Live(dir="strs", save_dvc_exp=False)
    logged = []
    original = live.log_metric

    def record(name, value, **kwargs):
        logged.append((name, value))
        return original(name, value, **kwargs)

    live.log_metric = record
    accelerator = Accelerator(cpu=True, log_with=DVCLiveTracker(live=live))
    accelerator.init_trackers("proj")
    with caplog.at_level("WARNING", logger="accel.trackers"):
        accelerator.log({"loss": 0.5, "note": "hello", "odd": [1, 2]}, step=0)
    accelerator.end_training()
    assert logged == [("loss", 0.5), ("note", "hello")]
    assert any("'odd'" in r.getMessage() for r in caplog.records)


@needs("mlflow")
@pytest.mark.parametrize(
    ("value", "expected"),
    [("yes", True), ("on", True), ("True", True), ("1", True), ("no", False), ("off", False)],
)
def test_mlflow_nested_run_variable_is_a_truth_value(monkeypatch, tmp_path, value, expected):
    """``MLFLOW_NESTED_RUN`` overrides ``nested_run`` in every spelling Accelerate accepts."""
    from accel_trackers.mlflow_tracker import MLflowTracker

    monkeypatch.setenv("MLFLOW_NESTED_RUN", value)
    tracker = MLflowTracker(experiment_name="nested", logging_dir=str(tmp_path))
    assert tracker.nested_run is expected
