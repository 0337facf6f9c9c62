"""The precision has one home, the backend context: everyone else reads it there.

Before ``prepare`` a new ``accelerator.precision`` takes effect everywhere (the context, the
backend, the checkpoint manager, an optimizer prepared afterwards, the next checkpoint);
after ``prepare`` it is refused with a clear error, since prepared models are wrapped with
the old one and optimizers step through its scaler.
"""

from __future__ import annotations

import pytest
import torch
from accel import Accelerator
from accel.checkpoint import layout
from accel.precision import Precision


class MarkedPrecision(Precision):
    """Full precision whose checkpointed state names it (as a scaler's state would)."""

    def __init__(self, marker: str, device: torch.device):
        super().__init__("no", device, {})
        self.marker = marker
        self.loaded: dict | None = None

    def state_dict(self) -> dict:
        return {"marker": self.marker}

    def load_state_dict(self, state_dict: dict) -> None:
        self.loaded = state_dict


def _model_and_optimizer() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = torch.nn.Linear(2, 2)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def test_a_precision_set_before_prepare_is_the_one_everyone_uses(tmp_path):
    accelerator = Accelerator(cpu=True)
    mine = MarkedPrecision("mine", accelerator.device)
    accelerator.precision = mine
    assert accelerator.backend_context.precision is mine
    assert accelerator.backend.context.precision is mine
    assert accelerator.checkpoints.precision is mine
    model, optimizer = accelerator.prepare(*_model_and_optimizer())
    assert optimizer.precision is mine
    path = accelerator.save_state(tmp_path / "ckpt")
    saved = layout.read_object(tmp_path / "ckpt" / layout.SCALER_NAME, True)
    assert saved == {"marker": "mine"}, "the checkpoint was written with a stale precision"
    accelerator.load_state(path)
    assert mine.loaded == {"marker": "mine"}


def test_setting_the_precision_after_prepare_is_refused_and_nothing_changes(tmp_path):
    accelerator = Accelerator(cpu=True)
    before = accelerator.precision
    model, optimizer = accelerator.prepare(*_model_and_optimizer())
    with pytest.raises(RuntimeError, match=r"cannot change after prepare\(\).*mixed_precision"):
        accelerator.precision = MarkedPrecision("late", accelerator.device)
    with pytest.raises(RuntimeError, match=r"cannot change after prepare\(\)"):
        accelerator.backend_context.precision = MarkedPrecision("late", accelerator.device)
    for seen in (
        accelerator.precision,
        accelerator.backend_context.precision,
        accelerator.backend.context.precision,
        accelerator.checkpoints.precision,
        optimizer.precision,
    ):
        assert seen is before
    accelerator.precision = before  # the same object: nothing changes, nothing to refuse
    accelerator.save_state(tmp_path / "ckpt")
    assert not (tmp_path / "ckpt" / layout.SCALER_NAME).exists()  # full precision: no scaler


def test_mixed_precision_is_read_only_with_a_clear_message():
    accelerator = Accelerator(cpu=True)
    with pytest.raises(AttributeError, match="fixed when the Accelerator is created"):
        accelerator.mixed_precision = "bf16"
    assert accelerator.mixed_precision == "no"


def test_backward_follows_a_precision_set_on_the_context_before_prepare():
    accelerator = Accelerator(cpu=True)
    calls = []

    class Counting(Precision):
        def backward(self, loss: torch.Tensor, **kwargs) -> None:
            calls.append(1)
            loss.backward(**kwargs)

    accelerator.backend_context.precision = Counting("no", accelerator.device, {})
    model, optimizer = accelerator.prepare(*_model_and_optimizer())
    accelerator.backward(model(torch.randn(3, 2)).sum())
    assert calls == [1]
