"""save_state / load_state: automatic naming, safety, atomicity, custom objects, hooks, RNG."""

from __future__ import annotations

import os
import random
import shlex

import numpy as np
import pytest
import torch
from accel import Accelerator, ProjectConfiguration
from accel.errors import CheckpointError
from accel.state import AcceleratorState, GradientState
from accel.utils import set_seed
from torch import nn


def _prepared(accelerator: Accelerator, seed: int = 0):
    torch.manual_seed(seed)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return accelerator.prepare(model, optimizer)


def _fill(model: nn.Module, value: float) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)


def _fresh_accelerator(**kwargs) -> Accelerator:
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    return Accelerator(cpu=True, **kwargs)


# -- automatic checkpoint naming ------------------------------------------------


def _auto_config(tmp_path, **kwargs) -> ProjectConfiguration:
    return ProjectConfiguration(
        project_dir=str(tmp_path), automatic_checkpoint_naming=True, total_limit=2, **kwargs
    )


def test_total_limit_keeps_the_newest_checkpoints(tmp_path):
    accelerator = Accelerator(cpu=True, project_config=_auto_config(tmp_path))
    model, _ = _prepared(accelerator)
    for i in range(3):
        _fill(model, float(i))
        path = accelerator.save_state()
        assert os.path.basename(path) == f"checkpoint_{i}"
    root = tmp_path / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["checkpoint_1", "checkpoint_2"]
    assert accelerator.save_iteration == 3


def test_load_state_without_a_directory_loads_the_newest_and_numbering_continues(tmp_path):
    accelerator = Accelerator(cpu=True, project_config=_auto_config(tmp_path))
    model, _ = _prepared(accelerator)
    for i in range(3):
        _fill(model, float(i))
        accelerator.save_state()

    # a new run (fresh Accelerator, iteration back at 0) resumes from the newest checkpoint
    accelerator = _fresh_accelerator(project_config=_auto_config(tmp_path))
    model, _ = _prepared(accelerator)
    _fill(model, 99.0)
    accelerator.load_state()
    assert torch.all(model.weight == 2.0)
    assert accelerator.save_iteration == 3

    _fill(model, 3.0)
    assert os.path.basename(accelerator.save_state()) == "checkpoint_3"
    root = tmp_path / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["checkpoint_2", "checkpoint_3"]
    accelerator.load_state()
    assert torch.all(model.weight == 3.0)


def test_automatic_naming_needs_a_project_dir():
    accelerator = Accelerator(
        cpu=True, project_config=ProjectConfiguration(automatic_checkpoint_naming=True)
    )
    _prepared(accelerator)
    with pytest.raises(ValueError, match="project_dir"):
        accelerator.save_state()


def test_save_state_without_directory_or_automatic_naming_is_an_error():
    accelerator = Accelerator(cpu=True)
    with pytest.raises(ValueError, match="output_dir"):
        accelerator.save_state()
    with pytest.raises(ValueError, match="input_dir"):
        accelerator.load_state()


def test_load_state_of_a_missing_directory_raises_checkpoint_error(tmp_path):
    accelerator = Accelerator(cpu=True)
    _prepared(accelerator)
    with pytest.raises(CheckpointError, match="does not exist"):
        accelerator.load_state(tmp_path / "nope")


# -- safety ------------------------------------------------------------------------


class _Exploit:
    """Unpickling this runs a shell command that creates ``marker``."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(self.marker)}",))


def test_a_malicious_pickle_in_a_checkpoint_is_refused(tmp_path):
    accelerator = Accelerator(cpu=True)
    _prepared(accelerator)
    ckpt = tmp_path / "ckpt"
    accelerator.save_state(ckpt)

    # control: the payload really runs code when unpickled without protection
    control_marker = tmp_path / "control-marker"
    control = tmp_path / "control.bin"
    torch.save({"payload": _Exploit(str(control_marker))}, control)
    torch.load(control, weights_only=False)
    assert control_marker.exists()

    marker = tmp_path / "pwned"
    good = torch.load(ckpt / "optimizer.bin", weights_only=True)
    good["param_groups"][0]["payload"] = _Exploit(str(marker))
    torch.save(good, ckpt / "optimizer.bin")

    # the manifest notices the changed file first ...
    with pytest.raises(CheckpointError, match="optimizer.bin is truncated or changed"):
        accelerator.load_state(ckpt)
    assert not marker.exists()
    # ... and a crafted folder without a manifest is still refused by weights_only
    (ckpt / "accel_manifest.json").unlink()
    with pytest.raises(CheckpointError, match="weights_only"):
        accelerator.load_state(ckpt)
    assert not marker.exists(), "load_state executed code from the checkpoint"


# -- atomicity -----------------------------------------------------------------------


class _Counter:
    def __init__(self):
        self.count = 0
        self.fail = False

    def state_dict(self):
        if self.fail:
            raise RuntimeError("boom while saving")
        return {"count": self.count}

    def load_state_dict(self, state):
        self.count = state["count"]


def test_save_leaves_no_temporary_directory(tmp_path):
    accelerator = Accelerator(cpu=True)
    _prepared(accelerator)
    ckpt = tmp_path / "ckpt"
    accelerator.save_state(ckpt)
    accelerator.save_state(ckpt)  # over an existing checkpoint
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    assert (ckpt / "model.safetensors").is_file()


def test_a_failing_save_keeps_the_previous_checkpoint(tmp_path):
    accelerator = Accelerator(cpu=True)
    model, _ = _prepared(accelerator)
    counter = _Counter()
    accelerator.register_for_checkpointing(counter)
    ckpt = tmp_path / "ckpt"
    _fill(model, 1.0)
    counter.count = 1
    accelerator.save_state(ckpt)
    before = {p.name: p.read_bytes() for p in ckpt.iterdir()}

    _fill(model, 2.0)
    counter.count = 2
    counter.fail = True
    with pytest.raises(RuntimeError, match="boom while saving"):
        accelerator.save_state(ckpt)

    assert {p.name: p.read_bytes() for p in ckpt.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"], "temporary files left behind"
    counter.fail = False
    accelerator.load_state(ckpt)
    assert torch.all(model.weight == 1.0)
    assert counter.count == 1


def test_a_failing_save_does_not_prune_older_checkpoints(tmp_path):
    accelerator = Accelerator(
        cpu=True,
        project_config=ProjectConfiguration(
            project_dir=str(tmp_path), automatic_checkpoint_naming=True, total_limit=1
        ),
    )
    _prepared(accelerator)
    counter = _Counter()
    accelerator.register_for_checkpointing(counter)
    accelerator.save_state()
    counter.fail = True
    with pytest.raises(RuntimeError, match="boom while saving"):
        accelerator.save_state()
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["checkpoint_0"]


# -- what a checkpoint holds --------------------------------------------------------------


def test_model_optimizer_and_scheduler_are_restored(tmp_path):
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    accelerator.backward(model(torch.randn(4, 3)).sum())
    optimizer.step()
    scheduler.step()
    accelerator.save_state(tmp_path / "ckpt")
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    momentum = optimizer.state[model.weight]["momentum_buffer"].clone()

    for _ in range(2):
        accelerator.backward(model(torch.randn(4, 3)).sum())
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    assert scheduler.get_last_lr() == [0.125]

    accelerator.load_state(tmp_path / "ckpt")
    for k, v in model.state_dict().items():
        assert torch.equal(v, weights[k])
    assert torch.equal(optimizer.state[model.weight]["momentum_buffer"], momentum)
    assert scheduler.get_last_lr() == [0.5]


def test_fp16_scaler_state_is_restored(tmp_path):
    accelerator = Accelerator(mixed_precision="fp16", cpu=True)
    model, optimizer = _prepared(accelerator)
    accelerator.backward(model(torch.randn(2, 3)).sum() * 1e38)  # overflow: scale halves
    optimizer.step()
    assert accelerator.scaler.get_scale() == 32768.0
    accelerator.save_state(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "scaler.pt").is_file()
    accelerator.backward(model(torch.randn(2, 3)).sum() * 1e38)
    optimizer.step()
    assert accelerator.scaler.get_scale() == 16384.0
    accelerator.load_state(tmp_path / "ckpt")
    assert accelerator.scaler.get_scale() == 32768.0


def test_register_for_checkpointing(tmp_path):
    accelerator = Accelerator(cpu=True)
    _prepared(accelerator)
    counter = _Counter()
    accelerator.register_for_checkpointing(counter)
    counter.count = 5
    accelerator.save_state(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "custom_checkpoint_0.pkl").is_file()
    counter.count = 42
    accelerator.load_state(tmp_path / "ckpt")
    assert counter.count == 5


def test_register_for_checkpointing_rejects_objects_without_state_dict():
    accelerator = Accelerator(cpu=True)
    with pytest.raises(ValueError, match="state_dict"):
        accelerator.register_for_checkpointing(_Counter(), object())


def test_save_and_load_pre_hooks(tmp_path):
    accelerator = Accelerator(cpu=True)
    model, _ = _prepared(accelerator)
    calls = []

    def save_hook(models, weights, output_dir):
        calls.append(("save", len(models), output_dir))
        assert models[0] is model
        # take the model's weights out of the default path and save them our own way
        state = weights.pop()
        torch.save(state, os.path.join(output_dir, "custom_model.pt"))

    def load_hook(models, input_dir):
        calls.append(("load", len(models), input_dir))
        target = models.pop()
        target.load_state_dict(torch.load(os.path.join(input_dir, "custom_model.pt")))

    save_handle = accelerator.register_save_state_pre_hook(save_hook)
    load_handle = accelerator.register_load_state_pre_hook(load_hook)
    ckpt = tmp_path / "ckpt"
    _fill(model, 1.0)
    accelerator.save_state(ckpt)
    assert (ckpt / "custom_model.pt").is_file()
    assert not (ckpt / "model.safetensors").exists()  # the hook popped the weights

    _fill(model, 7.0)
    accelerator.load_state(ckpt)  # would fail without the hook: no model.safetensors
    assert torch.all(model.weight == 1.0)
    assert [c[:2] for c in calls] == [("save", 1), ("load", 1)]
    assert calls[1][2] == str(ckpt)

    save_handle.remove()
    load_handle.remove()
    accelerator.save_state(tmp_path / "plain")
    assert (tmp_path / "plain" / "model.safetensors").is_file()
    assert len(calls) == 2


def test_rng_states_are_restored(tmp_path):
    accelerator = Accelerator(cpu=True)
    _prepared(accelerator)
    set_seed(123)
    random.random(), np.random.rand(), torch.rand(1), np.random.randn()  # advance, cache a gaussian
    accelerator.save_state(tmp_path / "ckpt")
    expected = (random.random(), np.random.rand(3), torch.rand(3), np.random.randn(3))
    set_seed(0)
    accelerator.load_state(tmp_path / "ckpt")
    got = (random.random(), np.random.rand(3), torch.rand(3), np.random.randn(3))
    assert got[0] == expected[0]
    assert np.array_equal(got[1], expected[1])
    assert torch.equal(got[2], expected[2])
    assert np.array_equal(got[3], expected[3])
