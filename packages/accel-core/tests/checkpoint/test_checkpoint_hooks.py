"""The checkpoint hooks: ``accel_checkpoint_saved`` after save_state, ``accel_before_resume`` before resume."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from accel import Accelerator, ProjectConfiguration, hookimpl
from accel.plugins import get_plugin_manager
from accel.testing.fixtures import reset_accel_state


class CheckpointPlugin:
    """Records each saved checkpoint; before resume, copies in one kept elsewhere."""

    def __init__(self, keep: Path | None = None):
        self.saved: list[str] = []
        self.keep = keep

    @hookimpl
    def accel_checkpoint_saved(self, accelerator, path):
        assert (Path(path) / "accel_manifest.json").is_file()  # complete when the hook runs
        self.saved.append(path)

    @hookimpl
    def accel_before_resume(self, accelerator, checkpoint_root):
        if self.keep is not None:
            shutil.copytree(self.keep, Path(checkpoint_root) / self.keep.name)


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
    path = accelerator.save_state()
    assert recorder.saved == [path]
    saved_weights = {k: v.clone() for k, v in model.state_dict().items()}

    reset_accel_state()
    register(CheckpointPlugin(keep=Path(path)))
    accelerator, model = _accelerator(tmp_path / "second")  # an empty project_dir
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
    resumed = accelerator.resume()
    assert resumed == str(tmp_path / "second" / "checkpoints" / "checkpoint_0")
    assert all(torch.equal(model.state_dict()[k], v) for k, v in saved_weights.items())
