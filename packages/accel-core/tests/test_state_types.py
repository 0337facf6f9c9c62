"""PartialState's distributed type is the process's, AcceleratorState's the training strategy (as Accelerate's)."""

from __future__ import annotations

import pytest
from accel.state import AcceleratorState, PartialState
from accel.types import DistributedType


@pytest.fixture
def one_launched_process(monkeypatch):
    """The variables a launcher gives the only process of a run."""
    for name, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(name, value)


def test_an_fsdp_accelerator_state_leaves_the_process_type_alone(monkeypatch):
    monkeypatch.setenv("ACCEL_DISTRIBUTED_TYPE", "FSDP")
    assert PartialState(cpu=True).distributed_type == DistributedType.NO
    state = AcceleratorState(cpu=True)
    assert state.distributed_type == DistributedType.FSDP
    assert PartialState().distributed_type == DistributedType.NO  # TRL reads this one
    assert "Distributed environment: FSDP" in repr(state)
    AcceleratorState._reset_state()  # the training setup goes, the process stays
    assert PartialState().distributed_type == DistributedType.NO


def test_setting_the_training_type_leaves_the_process_type_alone():
    state = AcceleratorState(cpu=True)
    assert state.distributed_type == DistributedType.NO
    state.distributed_type = DistributedType.MEGATRON_LM
    assert AcceleratorState().distributed_type == DistributedType.MEGATRON_LM
    assert PartialState().distributed_type == DistributedType.NO


@pytest.mark.parametrize(
    "switch", [("ACCELERATE_USE_DEEPSPEED", "true"), ("ACCEL_DISTRIBUTED_TYPE", "DEEPSPEED")]
)
def test_a_process_launched_for_deepspeed_says_so_before_any_accelerator(
    monkeypatch, one_launched_process, switch
):
    monkeypatch.setenv(*switch)
    assert PartialState().distributed_type == DistributedType.DEEPSPEED


def test_cpu_or_no_launcher_is_not_deepspeed(monkeypatch, one_launched_process):
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    assert PartialState(cpu=True).distributed_type == DistributedType.NO
    PartialState._reset_state()
    monkeypatch.delenv("LOCAL_RANK")
    assert PartialState().distributed_type == DistributedType.NO
