"""``Accelerator(log_with=...)`` checks its trackers when it is created, as Accelerate does."""

from __future__ import annotations

import pytest
from accel import Accelerator
from accel.tracking import GeneralTracker, filter_trackers, register_tracker_class


class NeedsDirectory(GeneralTracker):
    name = "needs_directory_tracker"
    requires_logging_directory = True

    def __init__(self, run_name, logging_dir, **kwargs):
        super().__init__()
        self.run_name, self.logging_dir = run_name, logging_dir

    @property
    def tracker(self):
        return self


class NoDirectory(NeedsDirectory):
    name = "no_directory_tracker"
    requires_logging_directory = False

    def __init__(self, run_name, **kwargs):
        GeneralTracker.__init__(self)
        self.run_name, self.logging_dir = run_name, None


@pytest.fixture
def registered():
    from accel.tracking import LOGGER_TYPE_TO_CLASS

    before = dict(LOGGER_TYPE_TO_CLASS._registered)
    register_tracker_class(NeedsDirectory)
    register_tracker_class(NoDirectory)
    yield
    LOGGER_TYPE_TO_CLASS._registered.clear()
    LOGGER_TYPE_TO_CLASS._registered.update(before)


class NotATracker:
    name = "not_a_tracker"
    requires_logging_directory = False


@pytest.mark.parametrize("entry", [NotATracker, NotATracker(), object(), 3, NeedsDirectory])
def test_an_entry_that_is_not_a_tracker_is_a_value_error(entry):
    with pytest.raises(ValueError, match="log_with"):
        Accelerator(cpu=True, log_with=entry)
    with pytest.raises(ValueError, match="log_with"):
        filter_trackers(["all", entry], logging_dir="logs")


def test_a_tracker_class_gets_a_hint():
    with pytest.raises(ValueError, match=r"pass an instance \(NeedsDirectory\(\.\.\.\)\)"):
        Accelerator(cpu=True, log_with=[NeedsDirectory])


def test_register_tracker_class_refuses_what_is_not_a_tracker_class():
    for entry in (NotATracker, NotATracker(), "a_name"):
        with pytest.raises(ValueError, match="subclass of `GeneralTracker`"):
            register_tracker_class(entry)


def test_register_tracker_class_needs_the_class_to_set_requires_logging_directory(registered):
    """GeneralTracker's own default does not count (Accelerate's rule)."""

    class NoFlagTracker(GeneralTracker):
        name = "no_flag_tracker"

    class FlagFromParent(NoDirectory):
        name = "flag_from_parent"

    with pytest.raises(ValueError, match="requires_logging_directory"):
        register_tracker_class(NoFlagTracker)
    register_tracker_class(FlagFromParent)  # inherited from a tracker class: fine


def test_a_tracker_needing_a_directory_says_so_when_the_accelerator_is_created(
    registered, tmp_path
):
    with pytest.raises(
        ValueError, match="Logging with `needs_directory_tracker` requires a `logging_dir`"
    ):
        Accelerator(cpu=True, log_with=["no_directory_tracker", "needs_directory_tracker"])
    accelerator = Accelerator(
        cpu=True, log_with=["no_directory_tracker", "needs_directory_tracker"], project_dir=tmp_path
    )
    accelerator.init_trackers("run")
    started = {t.name: t for t in accelerator.trackers}
    assert started["needs_directory_tracker"].logging_dir == str(tmp_path)
    assert started["no_directory_tracker"].run_name == "run"


def test_trackers_without_a_directory_need_none(registered):
    instance = NeedsDirectory("mine", None)  # an instance is used as given, as in Accelerate
    accelerator = Accelerator(cpu=True, log_with=["no_directory_tracker", instance])
    accelerator.init_trackers("run")
    assert [t.name for t in accelerator.trackers] == ["no_directory_tracker", instance.name]


class Recording(NoDirectory):
    name = "recording_tracker"

    def __init__(self):
        GeneralTracker.__init__(self)
        self.logged = []

    def log(self, values, step=None, **kwargs):
        self.logged.append((values, step))


def test_the_backend_s_tracker_values_come_with_every_log(monkeypatch):
    tracker = Recording()
    accelerator = Accelerator(cpu=True, log_with=[tracker])
    accelerator.init_trackers("run")
    accelerator.log({"loss": 1.0}, step=3)
    assert tracker.logged == [({"loss": 1.0}, 3)]  # core's backend adds nothing
    monkeypatch.setattr(accelerator.backend, "tracker_values", lambda: {"ft/quorum_size": 2})
    accelerator.tracking.value_sources[:] = [accelerator.backend.tracker_values]
    accelerator.log({"loss": 0.5, "ft/quorum_size": 9}, step=4)
    accelerator.log({"loss": 0.25}, step=5)
    assert tracker.logged[1:] == [
        ({"ft/quorum_size": 9, "loss": 0.5}, 4),  # the script's own value wins
        ({"ft/quorum_size": 2, "loss": 0.25}, 5),
    ]
