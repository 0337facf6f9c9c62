"""A state reset under a live Accelerator is named in the error (as Accelerate's)."""

from __future__ import annotations

import pytest
import torch
from accel import Accelerator
from accel.state import AcceleratorState, PartialState


def test_prepare_after_reset_names_the_reset():
    accelerator = Accelerator(cpu=True)
    AcceleratorState._reset_state()
    with pytest.raises(AttributeError) as raised:
        accelerator.prepare(torch.nn.Linear(1, 1))
    message = str(raised.value)
    assert "`AcceleratorState` object has no attribute" in message
    assert "`AcceleratorState._reset_state()` was called" in message


def test_a_set_up_state_keeps_the_plain_error():
    state = PartialState(cpu=True)
    with pytest.raises(AttributeError, match="^'PartialState' object has no attribute 'nothing'$"):
        state.nothing  # noqa: B018
    assert not hasattr(state, "nothing")
    PartialState._reset_state()
    with pytest.raises(AttributeError, match="`PartialState._reset_state\\(\\)` was called"):
        state.device  # noqa: B018


def test_after_an_accelerator_state_reset_only_the_partial_state_keeps_the_process():
    accelerator = Accelerator(cpu=True)
    assert accelerator.num_processes == 1
    AcceleratorState._reset_state()
    with pytest.raises(AttributeError, match="`AcceleratorState._reset_state\\(\\)` was called"):
        accelerator.num_processes  # noqa: B018
    with pytest.raises(AttributeError, match="`AcceleratorState` object has no attribute `device`"):
        accelerator.state.device  # noqa: B018
    assert PartialState().num_processes == 1 and PartialState().device.type == "cpu"
    again = Accelerator(cpu=True)  # a new Accelerator sets the training state up again
    assert again.num_processes == 1 and AcceleratorState().device.type == "cpu"
