"""The checkpoint hooks: ``accel_checkpoint_saved`` after save_state, ``accel_before_resume`` before resume."""

from __future__ import annotations

import contextlib
import gc
import shutil
import weakref
from pathlib import Path

import pluggy
import pytest
import torch
from accel import Accelerator, ProjectConfiguration, hookimpl
from accel.checkpoint.view import RunView
from accel.plugins import get_plugin_manager
from accel.testing.fixtures import reset_accel_state


class CheckpointPlugin:
    """Records each saved checkpoint; before resume, copies in one kept elsewhere."""

    def __init__(self, keep: Path | None = None):
        self.saved: list[str] = []
        self.runs: list[RunView] = []
        self.keep = keep

    @hookimpl
    def accel_checkpoint_saved(self, run, path):
        assert (Path(path) / "accel_manifest.json").is_file()  # complete when the hook runs
        self.saved.append(path)
        self.runs.append(run)

    @hookimpl
    def accel_before_resume(self, run, checkpoint_root):
        self.runs.append(run)
        if self.keep is not None and run.is_local_main_process:
            shutil.copytree(self.keep, Path(checkpoint_root) / self.keep.name)
        run.wait_for_everyone()


@pytest.fixture
def register():
    manager = get_plugin_manager()
    added = []

    def add(plugin):
        manager.register(plugin)
        added.append(plugin)
        return plugin

    yield add
    for plugin in added:
        manager.unregister(plugin)


def _accelerator(project: Path):
    accelerator = Accelerator(
        cpu=True,
        project_config=ProjectConfiguration(
            project_dir=str(project), automatic_checkpoint_naming=True
        ),
    )
    model = torch.nn.Linear(3, 2)
    return accelerator, accelerator.prepare(model)


def test_saved_checkpoints_reach_the_hook_and_resume_finds_a_copied_one(tmp_path, register):
    recorder = register(CheckpointPlugin())
    accelerator, model = _accelerator(tmp_path / "first")
    accelerator.step = 7
    path = accelerator.save_state()
    assert recorder.saved == [path]
    run = recorder.runs[0]  # a view of the run, not the Accelerator
    assert type(run) is RunView and not isinstance(run, Accelerator)
    assert (run.process_index, run.num_processes, run.local_process_index) == (0, 1, 0)
    assert run.is_main_process and run.is_local_main_process
    assert (run.step, run.checkpoint_path) == (7, path)
    with pytest.raises(AttributeError):  # frozen
        run.step = 8
    saved_weights = {k: v.clone() for k, v in model.state_dict().items()}

    reset_accel_state()
    recorder = register(CheckpointPlugin(keep=Path(path)))
    accelerator, model = _accelerator(tmp_path / "second")  # an empty project_dir
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
    resumed = accelerator.resume()
    root = str(tmp_path / "second" / "checkpoints")
    assert resumed == str(Path(root) / "checkpoint_0")
    assert type(recorder.runs[-1]) is RunView and recorder.runs[-1].checkpoint_path == root
    assert all(torch.equal(model.state_dict()[k], v) for k, v in saved_weights.items())


def test_an_implementation_asking_for_the_old_accelerator_argument_is_refused(register):
    """The first argument was renamed from ``accelerator`` to ``run``: pluggy checks names."""

    class Old:
        @hookimpl
        def accel_checkpoint_saved(self, accelerator, path):
            raise AssertionError("never called")

    with pytest.raises(pluggy.PluginValidationError, match="accelerator"):
        register(Old())


class ProfilePlugin:
    """Keeps the view ``accel_profile`` receives, as a plugin might."""

    def __init__(self):
        self.runs: list = []

    @hookimpl(tryfirst=True)
    def accel_profile(self, run, profile_kwargs):
        self.runs.append(run)
        return contextlib.nullcontext()


def test_kept_views_do_not_keep_the_accelerator_alive(tmp_path, register):
    """A plugin keeping the view of a checkpoint hook or of ``accel_profile`` keeps neither
    the Accelerator nor anything that holds it; the view's barrier still works."""
    recorder = register(CheckpointPlugin())
    profiler = register(ProfilePlugin())
    accelerator, model = _accelerator(tmp_path)
    accelerator.save_state()
    with accelerator.profile():
        pass
    kept = [recorder.runs[0], profiler.runs[0], RunView.of(accelerator, str(tmp_path))]
    assert all(type(run) is RunView for run in kept)
    assert profiler.runs[0].checkpoint_path == ""
    gone = weakref.ref(accelerator)
    del accelerator, model
    gc.collect()
    assert gone() is None, gc.get_referrers(gone())
    for run in kept:
        run.wait_for_everyone()
