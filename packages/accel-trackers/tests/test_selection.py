"""Registration, ``log_with`` resolution, ``"all"``, missing libraries, and cheap imports."""

from __future__ import annotations

import subprocess
import sys

import accel_trackers
import pytest
from accel import Accelerator
from accel.errors import MissingPluginError
from accel.plugins import list_plugins
from accel.tracking import NoOpTracker, available_trackers, filter_trackers
from accel.utils import LoggerType

NAMES = ["tensorboard", "wandb", "comet_ml", "aim", "mlflow", "clearml", "dvclive"]
EXTRAS = ["tensorboard", "wandb", "comet-ml", "aim", "mlflow", "clearml", "dvclive"]


def test_the_seven_trackers_are_registered_through_the_entry_point():
    info = {p.name: p for p in list_plugins()}["trackers"]
    assert info.distribution == "accel-trackers" and info.error is None
    assert "accel_trackers" in info.hooks
    assert set(NAMES) <= set(available_trackers(installed_only=False))
    assert [cls.name for cls in accel_trackers.TRACKERS] == NAMES
    assert [cls.package for cls in accel_trackers.TRACKERS] == [
        f"accel-trackers[{e}]" for e in EXTRAS
    ]


def test_classes_are_importable_from_accel_tracking():
    from accel.tracking import MLflowTracker, WandBTracker

    assert WandBTracker is accel_trackers.WandBTracker
    assert MLflowTracker is accel_trackers.MLflowTracker


def test_logger_type_names_resolve():
    entries = filter_trackers(
        [LoggerType.TENSORBOARD, LoggerType.WANDB, "MLflow", "wandb"], logging_dir="x"
    )
    assert entries == ["tensorboard", "wandb", "mlflow"]


def test_all_is_every_tracker_whose_library_is_installed(monkeypatch):
    monkeypatch.setattr(accel_trackers.AimTracker, "is_available", classmethod(lambda cls: False))
    names = filter_trackers("all", logging_dir="logs")
    assert "aim" not in names
    assert set(names) == {cls.name for cls in accel_trackers.TRACKERS if cls.is_available()} | {
        "jsonl"
    }


def test_all_without_a_logging_directory_skips_those_needing_one():
    with pytest.warns(
        UserWarning, match="skips the 'tensorboard' tracker: it needs a logging directory"
    ):
        names = filter_trackers("all", logging_dir=None)
    assert "tensorboard" not in names and "aim" not in names
    assert "wandb" in names


def test_a_tracker_whose_library_is_missing_names_the_extra(monkeypatch, workdir):
    monkeypatch.setattr(
        accel_trackers.CometMLTracker, "is_available", classmethod(lambda cls: False)
    )
    accelerator = Accelerator(cpu=True, log_with="comet_ml")
    with pytest.raises(MissingPluginError) as info:
        accelerator.init_trackers("project")
    assert "pip install accel-trackers[comet-ml]" in str(info.value)
    assert isinstance(info.value, ImportError)


def test_importing_a_missing_library_names_the_extra(monkeypatch):
    monkeypatch.setattr(accel_trackers.WandBTracker, "library", "wandb_not_installed_here")
    with pytest.raises(accel_trackers.TrackerLibraryMissingError, match=r"accel-trackers\[wandb\]"):
        accel_trackers.WandBTracker("project").start()


def test_an_unknown_tracker_names_the_package():
    with pytest.raises(MissingPluginError, match="installed trackers: .*wandb"):
        filter_trackers("neptune")


def test_a_tracker_needing_a_directory_without_one_is_a_clear_error():
    # Accelerate's words, then what to do
    with pytest.raises(
        ValueError,
        match="Logging with `tensorboard` requires a `logging_dir` to be passed in: pass project_dir=",
    ):
        Accelerator(cpu=True, log_with="tensorboard").init_trackers("project")


def test_building_a_tracker_creates_nothing(workdir):
    for cls in accel_trackers.TRACKERS:
        tracker = cls("project", logging_dir=str(workdir))
        assert tracker.tracker is None
    assert list(workdir.iterdir()) == []


def test_noop_tracker_accepts_everything():
    blank = Accelerator(cpu=True).get_tracker("wandb")
    assert isinstance(blank, NoOpTracker) and blank.name == "wandb"
    blank.log({"a": 1}, step=1)
    blank.log_images({"a": None}, step=1)
    blank.log_table("t", columns=["a"], data=[[1]])
    blank.tracker.log_artifact("x")
    blank.tracker.summary["x"] = 1
    with blank.tracker.anything() as thing:
        assert not thing
    blank.finish()


def test_importing_the_plugin_imports_no_tracking_library():
    code = (
        "import sys, accel_trackers.plugin; from accel.plugins import registry;"
        "names = sorted(registry.trackers());"
        "from accel.tracking import available_trackers; available_trackers();"
        "heavy = [m for m in ('wandb', 'mlflow', 'aim', 'clearml', 'comet_ml', 'dvclive', 'tensorboard', 'torch') if m in sys.modules];"
        "assert not heavy, heavy; print(names)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "wandb" in result.stdout


def test_env_info_lists_installed_libraries():
    from accel_trackers.plugin import accel_env_info

    line = accel_env_info()["Trackers"]
    for cls in accel_trackers.TRACKERS:
        if cls.is_available():
            assert cls.name in line.split(" (")[0]


@pytest.fixture
def registry_snapshot():
    """Undo what a test registers in ``LOGGER_TYPE_TO_CLASS``."""
    from accel.tracking import LOGGER_TYPE_TO_CLASS

    before = dict(LOGGER_TYPE_TO_CLASS._registered)
    yield LOGGER_TYPE_TO_CLASS
    LOGGER_TYPE_TO_CLASS._registered.clear()
    LOGGER_TYPE_TO_CLASS._registered.update(before)


def test_register_tracker_class_makes_it_usable_by_log_with_name(tmp_path, registry_snapshot):
    from accel.tracking import LOGGER_TYPE_TO_CLASS, GeneralTracker, register_tracker_class

    logged = []

    class MyTracker(GeneralTracker):
        name = "my_tracker"
        requires_logging_directory = True

        def __init__(self, run_name, logging_dir, flavour="plain"):
            super().__init__()
            self.run_name, self.logging_dir, self.flavour = run_name, logging_dir, flavour

        @property
        def tracker(self):
            return self

        def log(self, values, step=None, **kwargs):
            logged.append((values, step))

    register_tracker_class(MyTracker)
    assert LOGGER_TYPE_TO_CLASS["my_tracker"] is MyTracker
    assert "my_tracker" in LOGGER_TYPE_TO_CLASS and "tensorboard" in LOGGER_TYPE_TO_CLASS
    accelerator = Accelerator(cpu=True, log_with="my_tracker", project_dir=str(tmp_path))
    accelerator.init_trackers("proj", init_kwargs={"my_tracker": {"flavour": "spicy"}})
    tracker = accelerator.get_tracker("my_tracker")
    assert isinstance(tracker, MyTracker)
    assert (tracker.run_name, tracker.flavour) == ("proj", "spicy")
    assert str(tracker.logging_dir) == str(tmp_path)
    accelerator.log({"loss": 0.5}, step=1)
    assert logged == [({"loss": 0.5}, 1)]
    accelerator.end_training()

    # a logging directory is needed, as Accelerate checks
    with pytest.raises(ValueError, match="`my_tracker` requires a `logging_dir`"):
        filter_trackers("my_tracker", None)


def test_register_tracker_class_checks_the_class(registry_snapshot):
    from accel.tracking import GeneralTracker, register_tracker_class

    with pytest.raises(ValueError, match="subclass of `GeneralTracker`"):
        register_tracker_class(object)

    class Nameless(GeneralTracker):
        name = ""

    with pytest.raises(ValueError, match="non-empty `name`"):
        register_tracker_class(Nameless)

    class Shadow(GeneralTracker):
        name = "tensorboard"
        requires_logging_directory = False

    with pytest.warns(UserWarning, match="already registered"):
        register_tracker_class(Shadow)
    assert filter_trackers("tensorboard") == ["tensorboard"]
    from accel.tracking import LOGGER_TYPE_TO_CLASS

    assert LOGGER_TYPE_TO_CLASS["tensorboard"] is Shadow
