"""Gradient accumulation: accumulate(), sync_gradients, no-op optimizer steps, scheduler stepping."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from accel import Accelerator, GradientAccumulationPlugin
from accel.optimizer import AcceleratedOptimizer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


def _data(n: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(n, 4, generator=generator), torch.randn(n, 1, generator=generator)


def test_four_accumulation_steps_equal_one_step_on_the_concatenated_batch():
    model = _model()
    reference = copy.deepcopy(model)
    x, y = _data(8)

    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.5)
    F.mse_loss(reference(x), y).backward()
    ref_opt.step()

    accelerator = Accelerator(gradient_accumulation_steps=4, cpu=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model, optimizer = accelerator.prepare(model, optimizer)
    for i in range(4):
        with accelerator.accumulate(model):
            loss = F.mse_loss(model(x[2 * i : 2 * i + 2]), y[2 * i : 2 * i + 2])
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()

    before = dict(_model().named_parameters())
    for name, param in model.named_parameters():
        expected = dict(reference.named_parameters())[name]
        assert not torch.equal(param, before[name]), f"{name} was never updated"
        torch.testing.assert_close(param, expected, rtol=1e-6, atol=1e-7)


def test_accumulation_through_a_prepared_dataloader_matches_the_big_batch():
    model = _model()
    reference = copy.deepcopy(model)
    x, y = _data(8)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.5)
    F.mse_loss(reference(x), y).backward()
    ref_opt.step()

    accelerator = Accelerator(gradient_accumulation_steps=4, cpu=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loader = DataLoader(TensorDataset(x, y), batch_size=2)  # sequential: same samples as x, y
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for xb, yb in loader:
        with accelerator.accumulate(model):
            accelerator.backward(F.mse_loss(model(xb), yb))
            optimizer.step()
            optimizer.zero_grad()
    for (name, param), ref in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(param, ref, rtol=1e-6, atol=1e-7, msg=name)


def test_optimizer_step_and_zero_grad_are_noops_on_accumulation_steps():
    accelerator = Accelerator(gradient_accumulation_steps=4, cpu=True)
    model = _model()
    model, optimizer = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.5))
    assert isinstance(optimizer, AcceleratedOptimizer)
    x, y = _data(8)
    weight = model[0].weight
    initial = weight.detach().clone()
    grads = []
    for i in range(4):
        with accelerator.accumulate(model):
            accelerator.backward(F.mse_loss(model(x[2 * i : 2 * i + 2]), y[2 * i : 2 * i + 2]))
            grad_before_step = weight.grad.detach().clone()
            optimizer.step()
            optimizer.zero_grad()
            if i < 3:
                assert not accelerator.sync_gradients
                assert torch.equal(weight.detach(), initial), (
                    f"optimizer stepped on micro-batch {i}"
                )
                assert weight.grad is not None and torch.equal(weight.grad, grad_before_step), (
                    f"zero_grad cleared the accumulated gradient on micro-batch {i}"
                )
                grads.append(grad_before_step)
            else:
                assert accelerator.sync_gradients
                assert not torch.equal(weight.detach(), initial), "optimizer did not step"
                assert weight.grad is None, "zero_grad did not clear gradients on the sync step"
    # gradients really accumulate: each micro-batch adds to the previous total
    assert not torch.equal(grads[0], grads[1])


def test_sync_gradients_pattern():
    accelerator = Accelerator(gradient_accumulation_steps=4, cpu=True)
    model = accelerator.prepare(_model())
    pattern = []
    for _ in range(8):
        with accelerator.accumulate(model):
            pattern.append(accelerator.sync_gradients)
    assert pattern == [False, False, False, True] * 2


@pytest.mark.parametrize(
    ("sync_with_dataloader", "expected"),
    [
        (True, [False, False, False, True, False, True]),
        (False, [False, False, False, True, False, False]),
    ],
)
def test_sync_with_dataloader_forces_a_sync_on_the_last_batch(sync_with_dataloader, expected):
    plugin = GradientAccumulationPlugin(num_steps=4, sync_with_dataloader=sync_with_dataloader)
    accelerator = Accelerator(gradient_accumulation_plugin=plugin, cpu=True)
    model = _model()
    x, y = _data(12)
    loader = DataLoader(TensorDataset(x, y), batch_size=2)  # 6 batches, not a multiple of 4
    model, optimizer, loader = accelerator.prepare(
        model, torch.optim.SGD(model.parameters(), lr=0.1), loader
    )
    pattern = []
    for xb, yb in loader:
        with accelerator.accumulate(model):
            accelerator.backward(F.mse_loss(model(xb), yb))
            optimizer.step()
            optimizer.zero_grad()
            pattern.append(accelerator.sync_gradients)
    assert pattern == expected
    if sync_with_dataloader:
        # the trailing partial accumulation was applied and cleared: nothing leaks into the next epoch
        assert all(p.grad is None for p in model.parameters())
        # the next epoch starts a fresh accumulation window
        pattern = []
        for _xb, _yb in loader:
            with accelerator.accumulate(model):
                pattern.append(accelerator.sync_gradients)
        assert pattern == expected


@pytest.mark.parametrize("adjust_scheduler", [True, False])
def test_scheduler_steps_once_per_optimizer_step(adjust_scheduler):
    plugin = GradientAccumulationPlugin(num_steps=4, adjust_scheduler=adjust_scheduler)
    accelerator = Accelerator(gradient_accumulation_plugin=plugin, cpu=True)
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    x, y = _data(2)
    lrs = []
    for _ in range(12):
        with accelerator.accumulate(model):
            accelerator.backward(F.mse_loss(model(x), y))
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        lrs.append(scheduler.get_last_lr()[0])
    # 12 micro-batches, 4 per optimizer step: the schedule advanced exactly 3 times
    expected = [0.5 ** ((i + 1) // 4) for i in range(12)]
    assert lrs == pytest.approx(expected)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.125)
    assert scheduler.scheduler.last_epoch == 3
    # adjust_scheduler counts the accumulation steps in _step_count (no "step before optimizer" warning)
    assert scheduler.scheduler._step_count == (1 + 12 if adjust_scheduler else 1 + 3)


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")
def test_scheduler_not_linked_to_the_optimizer_steps_every_call():
    accelerator = Accelerator(gradient_accumulation_steps=4, step_scheduler_with_optimizer=False)
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    for _ in range(3):
        with accelerator.accumulate(model):
            optimizer.step()
            scheduler.step()
    assert scheduler.get_last_lr()[0] == pytest.approx(0.125)


def test_plugin_kwargs_hold_only_the_options_that_differ_from_the_defaults():
    # Accelerate's GradientState.plugin_kwargs is the plugin's to_kwargs(): transformers'
    # Trainer tests check that an untouched option (sync_each_batch) is absent from it.
    accelerator = Accelerator(cpu=True)
    state = accelerator.gradient_state
    assert state.plugin_kwargs == {"num_steps": 1}
    assert (state.num_steps, state.adjust_scheduler) == (1, True)
    assert (state.sync_with_dataloader, state.sync_each_batch) == (True, False)

    plugin = GradientAccumulationPlugin(num_steps=2, sync_each_batch=True)
    state = Accelerator(gradient_accumulation_plugin=plugin, cpu=True).gradient_state
    assert state.plugin_kwargs == {"num_steps": 2, "sync_each_batch": True}
    assert (state.num_steps, state.sync_each_batch) == (2, True)
