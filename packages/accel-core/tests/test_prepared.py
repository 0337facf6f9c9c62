"""The public view backends read: ``accelerator.prepared``, the connector's order, ``AcceleratorState.current()``."""

from __future__ import annotations

import pytest
import torch
from accel import Accelerator
from accel.errors import MissingPluginError
from accel.optimizer import AcceleratedOptimizer
from accel.prepared import PreparedObjects
from accel.state import AcceleratorState, PartialState


def _objects():
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 3)), 4)
    return model, optimizer, scheduler, data


def test_prepare_fills_the_prepared_lists_in_order():
    accelerator = Accelerator(cpu=True)
    model, optimizer, scheduler, data = accelerator.prepare(*_objects())
    prepared = accelerator.prepared
    assert isinstance(prepared, PreparedObjects)
    assert prepared.models == [model] and prepared.optimizers == [optimizer]
    assert prepared.schedulers == [scheduler] and prepared.dataloaders == [data]
    # the scheduler prepared in the same call steps the prepared optimizer
    assert scheduler.optimizers == [optimizer]
    assert prepared.optimizers_of(scheduler.scheduler) == [optimizer]
    assert prepared.model_for_optimizer(0) is model and prepared.model_for_optimizer(1) is None


def test_prepared_objects_carry_accelerates_mark():
    """Every prepared object, the model too, has ``_is_accelerate_prepared`` (as in Accelerate)."""
    accelerator = Accelerator(cpu=True)
    *prepared, other = accelerator.prepare(*_objects(), [1, 2, 3])
    assert [getattr(o, "_is_accelerate_prepared", False) for o in prepared] == [True] * 4
    assert not hasattr(other, "_is_accelerate_prepared")


def test_accelerate_private_names_are_the_same_lists():
    accelerator = Accelerator(cpu=True)
    accelerator.prepare(*_objects())
    prepared = accelerator.prepared
    assert accelerator._models is prepared.models
    assert accelerator._optimizers is prepared.optimizers
    assert accelerator._schedulers is prepared.schedulers
    assert accelerator._dataloaders is prepared.dataloaders
    assert accelerator._custom_objects is prepared.custom_objects
    accelerator.free_memory()
    assert not (prepared.models or prepared.optimizers or prepared.schedulers)


def test_accelerate_private_names_can_be_replaced():
    """As in Accelerate, where they are plain lists (transformers' Trainer tests assign ``_models``)."""
    accelerator = Accelerator(cpu=True)
    model, optimizer, _, _ = accelerator.prepare(*_objects())
    accelerator._models = []
    accelerator._optimizers = [optimizer]
    assert accelerator._models == [] and accelerator.prepared.models == []
    assert accelerator.prepared.optimizers == [optimizer]
    accelerator._models = [model]
    assert accelerator.prepared.lookup(model) is model


def test_optimizers_of_falls_back_to_the_schedulers_own_optimizer():
    model = torch.nn.Linear(2, 2)
    plain = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(plain, step_size=1)
    prepared = PreparedObjects()
    assert prepared.optimizers_of(scheduler) == [plain]
    wrapped = AcceleratedOptimizer(plain)
    assert prepared.optimizers_of(scheduler, also=[wrapped]) == [wrapped]


def test_register_rejects_objects_without_state_dict_and_adds_nothing():
    prepared = PreparedObjects()
    with pytest.raises(ValueError) as raised:
        prepared.register(torch.nn.Linear(1, 1), object(), torch.tensor(1.0))
    assert prepared.custom_objects == []
    message = str(raised.value)  # one line per object, by its position (Accelerate's wording)
    assert "Item at index 1, `object`" in message and "Item at index 2, `Tensor`" in message
    assert "Item at index 0" not in message


def test_current_state_is_none_until_set_up_and_creates_nothing():
    assert AcceleratorState.current() is None
    assert PartialState.current() is None
    assert PartialState.current() is None  # asking twice still sets nothing up
    accelerator = Accelerator(cpu=True, mixed_precision="bf16")
    state = AcceleratorState.current()
    assert state is not None and state.mixed_precision == "bf16"
    assert state.device == accelerator.device
    AcceleratorState._reset_state()
    assert AcceleratorState.current() is None and PartialState.current() is not None


def test_accel_backend_names_a_backend_explicitly(monkeypatch):
    monkeypatch.setenv("ACCEL_BACKEND", "single_process")
    assert type(Accelerator(cpu=True).backend).__name__ == "SingleProcessBackend"
    AcceleratorState._reset_state(True)
    monkeypatch.setenv("ACCEL_BACKEND", "no-such-backend")
    with pytest.raises(MissingPluginError, match="no-such-backend"):
        Accelerator(cpu=True)
    assert AcceleratorState.current() is None  # a failed Accelerator leaves no state behind


def test_preparing_an_object_twice_returns_the_prepared_one(tmp_path):
    """As Accelerate: preparing a prepared object, or the original again, changes nothing."""
    accelerator = Accelerator(cpu=True)
    model, optimizer, scheduler, data = _objects()
    prepared = accelerator.prepare(model, optimizer, scheduler, data)
    again = accelerator.prepare(*prepared)  # the prepared objects themselves
    assert all(a is b for a, b in zip(again, prepared))
    originals = accelerator.prepare(model, optimizer, scheduler)  # the user's objects again
    assert all(a is b for a, b in zip(originals, prepared[:3]))
    assert accelerator.prepare_model(model) is prepared[0]
    assert accelerator.prepare_optimizer(optimizer) is prepared[1]
    assert accelerator.prepare_scheduler(scheduler) is prepared[2]
    assert accelerator.prepare_data_loader(prepared[3]) is prepared[3]
    assert accelerator.prepare_model(prepared[0], evaluation_mode=True) is prepared[0]
    lists = accelerator.prepared
    assert [len(lists.models), len(lists.optimizers), len(lists.schedulers)] == [1, 1, 1]
    assert len(lists.dataloaders) == 1
    assert not isinstance(prepared[1].optimizer, AcceleratedOptimizer)
    accelerator.save_state(tmp_path / "ckpt")
    assert not (tmp_path / "ckpt" / "model_1.safetensors").exists()
    assert not (tmp_path / "ckpt" / "optimizer_1.bin").exists()
    # a prepared object is new to another Accelerator: it is tracked there, not wrapped again
    accelerator.free_memory()
    assert accelerator.prepare(prepared[1]) is prepared[1]
    assert accelerator.prepared.optimizers == [prepared[1]]
