"""find_executable_batch_size, release_memory and Accelerator.free_memory."""

from __future__ import annotations

import gc
import logging
import weakref

import pytest
import torch
from accel import Accelerator, find_executable_batch_size
from accel.utils import release_memory, should_reduce_batch_size
from torch import nn


def _oom() -> torch.OutOfMemoryError:
    return torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def test_batch_size_is_multiplied_by_0_9_by_default_as_in_accelerate(caplog):
    calls = []

    @find_executable_batch_size(starting_batch_size=128)
    def train(batch_size, scale):
        calls.append(batch_size)
        if batch_size > 105:
            raise _oom()
        return batch_size * scale

    with caplog.at_level(logging.WARNING, logger="accel.memory"):
        assert train(10) == 1030
    assert calls == [128, 115, 103]
    retries = [r.getMessage() for r in caplog.records if r.name == "accel.memory"]
    assert len(retries) == 2
    for (old, new), message in zip([(128, 115), (115, 103)], retries):
        assert f"batch_size={old}" in message and f"batch_size={new}" in message


def test_halving_is_reachable_through_reduce_batch_size_fn():
    calls = []

    @find_executable_batch_size(
        starting_batch_size=128, reduce_batch_size_fn=lambda size: size // 2
    )
    def train(batch_size):
        calls.append(batch_size)
        if batch_size > 16:
            raise _oom()
        return batch_size

    assert train() == 16
    assert calls == [128, 64, 32, 16]


def test_non_oom_errors_propagate():
    calls = []

    @find_executable_batch_size(starting_batch_size=64)
    def train(batch_size):
        calls.append(batch_size)
        raise ValueError("a bug, not memory")

    with pytest.raises(ValueError, match="a bug"):
        train()
    assert calls == [64]


def test_a_runtime_error_mentioning_cuda_is_not_mistaken_for_oom():
    assert should_reduce_batch_size(_oom())
    assert should_reduce_batch_size(RuntimeError("DefaultCPUAllocator: can't allocate memory"))
    assert not should_reduce_batch_size(RuntimeError("CUDA error: device-side assert triggered"))
    assert not should_reduce_batch_size(ValueError("out of memory"))


def test_reaching_zero_raises():
    calls = []

    @find_executable_batch_size(starting_batch_size=3)
    def train(batch_size):
        calls.append(batch_size)
        raise _oom()

    with pytest.raises(RuntimeError, match="No executable batch size found, reached zero"):
        train()
    assert calls == [3, 2, 1]


def test_passing_the_batch_size_yourself_is_an_error():
    @find_executable_batch_size(starting_batch_size=8)
    def train(batch_size, lr):
        return batch_size

    with pytest.raises(TypeError, match="Remove this as the decorator already does so"):
        train(8, 0.1)


def test_custom_reduction_function():
    calls = []

    @find_executable_batch_size(starting_batch_size=100, reduce_batch_size_fn=lambda b: b - 30)
    def train(batch_size):
        calls.append(batch_size)
        if batch_size > 50:
            raise _oom()
        return batch_size

    assert train() == 40
    assert calls == [100, 70, 40]


def test_release_memory_returns_nones():
    a, b = torch.ones(3), nn.Linear(2, 2)
    a, b = release_memory(a, b)
    assert a is None and b is None
    assert release_memory() == []


def test_free_memory_drops_the_accelerators_references():
    accelerator = Accelerator(cpu=True)
    model = nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    ref = weakref.ref(model)
    assert accelerator._models and accelerator._optimizers
    model, optimizer = accelerator.free_memory(model, optimizer)
    assert model is None and optimizer is None
    assert not accelerator._models and not accelerator._optimizers
    gc.collect()
    assert ref() is None, "something still holds the prepared model"
