"""Core behaviours the Hugging Face stack relies on: Accelerate's variable names,
``PartialState(backend=, timeout=)``, ``backward(learning_rate=)`` with LOMO, ``state.is_initialized``."""

from __future__ import annotations

import textwrap

import pytest
import torch
from accel.config.core_options import KEYS, launched_distributed_type
from accel.testing.processes import run_processes


def test_accelerate_spelling_is_read_when_accels_is_unset(monkeypatch):
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    assert KEYS["mixed_precision"].from_env() == "bf16"
    monkeypatch.setenv("ACCELERATE_USE_CPU", "true")
    assert KEYS["use_cpu"].from_env() is True
    monkeypatch.setenv("ACCEL_MIXED_PRECISION", "fp16")  # accel's own name wins
    assert KEYS["mixed_precision"].from_env() == "fp16"


@pytest.mark.parametrize(
    "flag, distributed_type",
    [("ACCELERATE_USE_DEEPSPEED", "DEEPSPEED"), ("ACCELERATE_USE_FSDP", "FSDP")],
)
def test_use_flags_select_the_distributed_type(monkeypatch, flag, distributed_type):
    assert launched_distributed_type() is None
    monkeypatch.setenv(flag, "true")
    assert launched_distributed_type() == distributed_type


def test_accelerator_reads_accelerate_mixed_precision(monkeypatch):
    from accel import Accelerator

    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    assert Accelerator(cpu=True).mixed_precision == "bf16"


def test_launcher_exports_both_spellings():
    from accel.launchers.planning import worker_environment

    env = worker_environment(
        {"mixed_precision": "bf16", "distributed_type": "FSDP", "use_cpu": True}
    )
    assert env["ACCEL_MIXED_PRECISION"] == env["ACCELERATE_MIXED_PRECISION"] == "bf16"
    assert env["ACCELERATE_USE_FSDP"] == "true"
    assert env["ACCELERATE_USE_CPU"] == "true"
    assert "ACCELERATE_LAUNCH_CONFIG" not in env


def test_is_initialized():
    from accel import Accelerator, PartialState
    from accel.state import is_initialized

    PartialState(cpu=True)
    assert not is_initialized()
    Accelerator(cpu=True)
    assert is_initialized()


def _plain_gradients(model: torch.nn.Module, loss_of) -> dict[str, torch.Tensor]:
    """The gradients of ``loss_of(copy)`` on a copy of ``model``: plain autograd, no optimizer."""
    import copy

    reference = copy.deepcopy(model)
    loss_of(reference).backward()
    return {name: p.grad.clone() for name, p in reference.named_parameters()}


def test_backward_with_learning_rate_runs_lomos_fused_backward():
    """LOMO updates each weight in the backward pass by the ``learning_rate`` given to
    ``backward``, not by the optimizer's own (its hooks would use that one in a plain backward)."""
    lomo_optim = pytest.importorskip("lomo_optim")
    from accel import Accelerator

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    x = torch.randn(8, 4)

    def loss_of(m):
        return m(x).pow(2).mean()

    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    grads = _plain_gradients(model, loss_of)

    accelerator = Accelerator(cpu=True)
    model, optimizer = accelerator.prepare(model, lomo_optim.Lomo(model, lr=0.5))
    accelerator.backward(loss_of(model), learning_rate=0.1)
    for name, p in model.named_parameters():
        assert not torch.equal(p, initial[name]), name
        torch.testing.assert_close(p.detach(), initial[name] - 0.1 * grads[name], msg=name)


def test_backward_learning_rate_is_ignored_by_other_optimizers():
    """With SGD, ``backward(learning_rate=)`` computes the plain gradients and changes no
    weight; the step then uses the optimizer's learning rate."""
    from accel import Accelerator

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    x = torch.randn(3, 4)

    def loss_of(m):
        return m(x).sum()

    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    grads = _plain_gradients(model, loss_of)

    accelerator = Accelerator(cpu=True)
    model, optimizer = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
    accelerator.backward(loss_of(model), learning_rate=5.0)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), initial[name], rtol=0, atol=0, msg=name)
        torch.testing.assert_close(p.grad, grads[name], msg=name)
    optimizer.step()
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), initial[name] - 0.1 * grads[name], msg=name)


WORKER = textwrap.dedent(
    """
    from datetime import timedelta
    import torch.distributed as dist
    from accel import PartialState

    state = PartialState(backend="cpu:gloo", timeout=timedelta(seconds=77))
    assert state.num_processes == 2
    assert state.backend == "cpu:gloo", state.backend
    assert state.timeout == timedelta(seconds=77), state.timeout
    assert dist.is_initialized()
    state.wait_for_everyone()
    """
)


def test_partial_state_backend_and_timeout(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    run_processes(script, nproc=2, timeout=180)


def test_sizes_and_custom_dtypes_count_as_in_accelerate():
    from accel.memory import dtype_byte_size
    from accel.sizes import parse_size
    from accel.types import CustomDtype

    assert parse_size("8Gb") == 10**9  # a lowercase b after a decimal unit counts bits
    assert parse_size("8GB") == 8 * 10**9
    assert parse_size("2GiB") == 2 * 2**30
    assert [dtype_byte_size(d) for d in (CustomDtype.INT2, CustomDtype.INT4, CustomDtype.FP8)] == [
        0.25,
        0.5,
        1.0,
    ]
