"""Mixed precision on CPU: bf16 / fp16 autocast, GradScaler, skipped steps, kwargs handlers."""

from __future__ import annotations

import copy

import pytest
import torch
from accel import Accelerator, AutocastKwargs, GradScalerKwargs
from torch import nn


def _linear() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 4))


def _record_output_dtype(module: nn.Module) -> list[torch.dtype]:
    seen: list[torch.dtype] = []
    # hook the inner Linear: a hook on the prepared model itself sees the converted output
    module[0].register_forward_hook(lambda _m, _i, out: seen.append(out.dtype))
    return seen


def test_bf16_autocast_runs_matmul_in_bfloat16():
    accelerator = Accelerator(mixed_precision="bf16", cpu=True)
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    with accelerator.autocast():
        assert (a @ b).dtype == torch.bfloat16
    assert (a @ b).dtype == torch.float32  # only inside the context


def test_bf16_prepared_model_computes_in_bf16_and_returns_fp32():
    accelerator = Accelerator(mixed_precision="bf16", cpu=True)
    model = accelerator.prepare(_linear())
    inner = _record_output_dtype(model)
    out = model(torch.randn(2, 8))
    assert inner == [torch.bfloat16]  # the Linear ran under autocast
    assert out.dtype == torch.float32  # ... and its output was converted back
    assert model[0].weight.dtype == torch.float32  # master weights stay in fp32


def test_no_mixed_precision_leaves_everything_in_fp32():
    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(_linear())
    inner = _record_output_dtype(model)
    with accelerator.autocast():
        assert (torch.randn(2, 2) @ torch.randn(2, 2)).dtype == torch.float32
    model(torch.randn(2, 8))
    assert inner == [torch.float32]
    assert accelerator.scaler is None


def _fp16_setup(**kwargs):
    accelerator = Accelerator(mixed_precision="fp16", cpu=True, **kwargs)
    model = _linear()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    return accelerator, model, optimizer, scheduler


def test_fp16_has_a_grad_scaler_and_autocasts_to_float16():
    accelerator, model, _, _ = _fp16_setup()
    assert isinstance(accelerator.scaler, torch.amp.GradScaler)
    assert accelerator.scaler.get_scale() == 65536.0
    inner = _record_output_dtype(model)
    assert model(torch.randn(2, 8)).dtype == torch.float32
    assert inner == [torch.float16]


def test_fp16_backward_scales_the_loss():
    accelerator, model, optimizer, _ = _fp16_setup(
        kwargs_handlers=[GradScalerKwargs(init_scale=1024.0)]
    )
    x = torch.randn(4, 8)
    accelerator.backward(model(x).sum())
    expected = x.sum(0).expand(4, 8)  # d(sum(W x + b))/dW, unscaled
    torch.testing.assert_close(model[0].weight.grad, 1024.0 * expected, rtol=1e-2, atol=1e-2)
    accelerator.unscale_gradients()
    torch.testing.assert_close(model[0].weight.grad, expected, rtol=1e-2, atol=1e-3)


def test_fp16_overflow_skips_the_step_and_the_scheduler():
    accelerator, model, optimizer, scheduler = _fp16_setup()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(1, 8) * 0.1  # small enough for fp16 gradients at scale 65536

    loss = model(x).sum() * 1e38  # scaled by 65536 it overflows: inf gradients
    accelerator.backward(loss)
    assert not torch.isfinite(model[0].weight.grad).all()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()

    assert accelerator.optimizer_step_was_skipped
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), f"{key} changed on a skipped step"
    assert scheduler.get_last_lr() == [0.1]  # the scheduler did not step either
    assert scheduler.scheduler.last_epoch == 0
    assert accelerator.scaler.get_scale() == 32768.0  # backed off

    # a normal step afterwards goes through and clears the flag
    accelerator.backward(model(x).sum())
    optimizer.step()
    scheduler.step()
    assert not accelerator.optimizer_step_was_skipped
    assert not torch.equal(model[0].weight, before["0.weight"])
    assert scheduler.get_last_lr() == [pytest.approx(0.05)]


def test_grad_scaler_kwargs_are_honoured():
    accelerator, model, optimizer, _ = _fp16_setup(
        kwargs_handlers=[GradScalerKwargs(init_scale=1024, growth_interval=1, growth_factor=4.0)]
    )
    assert accelerator.scaler.get_scale() == 1024.0
    accelerator.backward(model(torch.randn(2, 8)).sum())
    optimizer.step()
    assert not accelerator.optimizer_step_was_skipped
    assert accelerator.scaler.get_scale() == 4096.0  # grew by growth_factor after growth_interval=1


def test_autocast_kwargs_enabled_false_disables_autocast():
    accelerator = Accelerator(
        mixed_precision="bf16", cpu=True, kwargs_handlers=[AutocastKwargs(enabled=False)]
    )
    with accelerator.autocast():
        assert (torch.randn(2, 2) @ torch.randn(2, 2)).dtype == torch.float32
    model = accelerator.prepare(_linear())
    inner = _record_output_dtype(model)
    model(torch.randn(2, 8))
    assert inner == [torch.float32]


def test_autocast_handler_argument_overrides_the_default():
    accelerator = Accelerator(mixed_precision="bf16", cpu=True)
    with accelerator.autocast(autocast_handler=AutocastKwargs(enabled=False)):
        assert (torch.randn(2, 2) @ torch.randn(2, 2)).dtype == torch.float32
    with accelerator.autocast():
        assert (torch.randn(2, 2) @ torch.randn(2, 2)).dtype == torch.bfloat16


def test_duplicate_kwargs_handlers_are_rejected():
    with pytest.raises(ValueError, match="GradScalerKwargs"):
        Accelerator(cpu=True, kwargs_handlers=[GradScalerKwargs(), GradScalerKwargs()])


def test_a_deep_copy_of_a_prepared_model_runs_its_own_weights():
    # e.g. an EMA or teacher copy made after prepare()
    accelerator = Accelerator(mixed_precision="bf16", cpu=True)
    model = accelerator.prepare(_linear())
    copy_ = copy.deepcopy(model)
    with torch.no_grad():
        copy_[0].weight.zero_()
        copy_[0].bias.fill_(1.0)
    inner = _record_output_dtype(copy_)
    x = torch.randn(2, 8)
    out = copy_(x)
    assert torch.equal(out, torch.ones(2, 4))  # not the original model's output
    assert inner == [torch.bfloat16] and out.dtype == torch.float32
    assert not torch.equal(model(x), out)
    plain = accelerator.unwrap_model(copy_, keep_fp32_wrapper=False)
    assert "forward" not in plain.__dict__
    assert torch.equal(plain(x), torch.ones(2, 4))


def test_an_overridden_forward_context_still_wraps_the_forward():
    # The wrapped forward enters torch.autocast directly only when forward_context and
    # autocast are the base ones; a subclass's forward_context (TE's fp8 autocast) is used.
    from accel.precision.native import BF16Precision

    entered = []

    class Recording(BF16Precision):
        names = ()

        def forward_context(self, model):
            entered.append(model)
            return torch.autocast(device_type="cpu", enabled=False)

    model = _linear()
    precision = Recording("bf16", torch.device("cpu"))
    assert precision._direct_autocast() is None
    precision.wrap_model(model)
    inner = _record_output_dtype(model)
    model(torch.randn(2, 8))
    assert entered == [model] and inner == [torch.float32]
    plain = BF16Precision("bf16", torch.device("cpu"))
    assert plain._direct_autocast() is not None
