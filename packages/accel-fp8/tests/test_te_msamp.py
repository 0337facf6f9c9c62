"""TransformerEngine and MS-AMP: the arguments accel-fp8 builds, checked against the
signatures those libraries document; the layer selection and optimizer re-pointing on real
torch modules. Only the calls into the libraries themselves need their hardware: those tests
skip, naming what is missing."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import torch
from accel_fp8 import MSAMPRecipeKwargs, TERecipeKwargs, is_msamp_available
from accel_fp8 import is_transformer_engine_available as te_available
from accel_fp8.ms_amp import initialize_arguments
from accel_fp8.te import (
    autocast_call,
    layer_arguments,
    plan_layer_swaps,
    recipe_arguments,
    repoint_optimizers,
)

# --- documented signatures (transformer_engine/common/recipe/__init__.py, DelayedScaling) ---


def delayed_scaling_v1_12(
    margin=0, interval=-1, fp8_format="HYBRID", amax_history_len=1024, amax_compute_algo="max",
    override_linear_precision=(False, False, False), scaling_factor_compute_algo=None,
    reduce_amax=True, fp8_dpa=False, fp8_mha=False,
): ...  # fmt: skip


def delayed_scaling_v2_0(
    margin=0, interval=-1, fp8_format="HYBRID", amax_history_len=1024, amax_compute_algo="max",
    scaling_factor_compute_algo=None, reduce_amax=True, fp8_dpa=False, fp8_mha=False,
): ...  # fmt: skip


def delayed_scaling_v2_3(
    margin=0, fp8_format="HYBRID", amax_history_len=1024, amax_compute_algo="max",
    scaling_factor_compute_algo=None, reduce_amax=True, fp8_dpa=False, fp8_mha=False,
    backward_override=None,
): ...  # fmt: skip


# transformer_engine/pytorch: fp8_autocast (1.x, deprecated in 2.x) and autocast (2.x)
def fp8_autocast(
    enabled=True, calibrating=False, fp8_recipe=None, fp8_group=None, _graph=False
): ...


def te_autocast(
    enabled=True, calibrating=False, recipe=None, amax_reduction_group=None, _graph=False
): ...


# transformer_engine/pytorch/module: Linear and LayerNorm constructors (1.12 and 2.x)
def te_linear(
    in_features, out_features, sequence_parallel=False, fuse_wgrad_accumulation=False,
    tp_group=None, tp_size=1, get_rng_state_tracker=None, rng_tracker_name=None,
    init_method=None, bias=True, return_bias=False, params_dtype=None, parallel_mode=None,
    parameters_split=None, device="cuda", ub_overlap_rs=False, ub_overlap_ag=False, ub_name=None,
): ...  # fmt: skip


def te_layernorm_v1_12(
    hidden_size, eps=1e-5, sequence_parallel=False, params_dtype=None, zero_centered_gamma=False,
    device="cuda",
): ...  # fmt: skip


def te_layernorm_v2(
    normalized_shape=None, eps=1e-5, sequence_parallel=None, params_dtype=None,
    zero_centered_gamma=False, hidden_size=None, **kwargs,
): ...  # fmt: skip


# msamp/__init__.py
def msamp_initialize(model, optimizer=None, opt_level="O1", use_te=False): ...


def _accepted(signature_of: Any) -> list[str]:
    return list(inspect.signature(signature_of).parameters)


SEED_TE = {
    "amax_compute_algo": "max", "amax_history_len": 1024, "fp8_format": "HYBRID",
    "interval": 1, "margin": 0, "override_linear_precision": "(false, false, false)",
    "use_autocast_during_eval": False,
}  # fmt: skip


@pytest.mark.parametrize(
    "documented", [delayed_scaling_v1_12, delayed_scaling_v2_0, delayed_scaling_v2_3]
)
def test_te_recipe_translation_binds_to_every_documented_delayed_scaling(documented):
    handler = TERecipeKwargs(**{k: v for k, v in SEED_TE.items()})
    kwargs = recipe_arguments(handler, _accepted(documented))
    expected = {"margin": 0, "fp8_format": "HYBRID", "amax_history_len": 1024,
                "amax_compute_algo": "max"}  # fmt: skip
    if "override_linear_precision" in _accepted(documented):
        expected["override_linear_precision"] = (False, False, False)
    assert kwargs == expected  # interval: documented as deprecated and unused, never passed
    inspect.signature(documented).bind(**kwargs)
    assert "use_autocast_during_eval" not in kwargs  # decides when, not how


def test_te_recipe_translation_refuses_what_te_cannot_do():
    wgrad = TERecipeKwargs(override_linear_precision=(False, False, True), fp8_format="E4M3")
    kwargs = recipe_arguments(wgrad, _accepted(delayed_scaling_v1_12))
    assert kwargs["override_linear_precision"] == (False, False, True)
    assert kwargs["fp8_format"] == "E4M3"
    with pytest.raises(ValueError, match="only supports running the wgrad GEMM"):
        recipe_arguments(
            TERecipeKwargs(override_linear_precision="true,false,false"),
            _accepted(delayed_scaling_v1_12),
        )
    with pytest.raises(ValueError, match=">= 2.0. no longer supports it"):
        recipe_arguments(wgrad, _accepted(delayed_scaling_v2_3))


@pytest.mark.parametrize("enabled", [True, False])
def test_te_autocast_arguments_match_both_apis(enabled):
    recipe = object()
    name, kwargs = autocast_call(True, enabled, recipe)
    assert name == "autocast" and kwargs == {"enabled": enabled, "recipe": recipe}
    inspect.signature(te_autocast).bind(**kwargs)
    name, kwargs = autocast_call(False, enabled, recipe)
    assert name == "fp8_autocast" and kwargs == {"enabled": enabled, "fp8_recipe": recipe}
    inspect.signature(fp8_autocast).bind(**kwargs)


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(32)
        self.up = torch.nn.Linear(32, 64)
        self.odd = torch.nn.Linear(64, 24)  # 24 is no multiple of 16: stays torch
        self.attn = torch.nn.MultiheadAttention(32, 2)  # its out_proj is a Linear subclass
        self.norm2d = torch.nn.LayerNorm((4, 8))  # two dimensions: stays torch


def test_te_layer_plan_and_constructor_arguments():
    model = _Block().to(torch.bfloat16)
    assert plan_layer_swaps(model) == [("norm", "LayerNorm"), ("up", "Linear")]
    args, kwargs = layer_arguments(model.up, "Linear", "cuda")
    assert args == (32, 64)
    assert kwargs == {"bias": True, "params_dtype": torch.bfloat16, "device": "cuda"}
    inspect.signature(te_linear).bind(*args, **kwargs)
    args, kwargs = layer_arguments(model.norm, "LayerNorm", "cuda")
    assert args == (32,) and kwargs["eps"] == model.norm.eps
    for documented in (te_layernorm_v1_12, te_layernorm_v2):
        inspect.signature(documented).bind(*args, **kwargs)


def test_optimizer_follows_swapped_parameters():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(2, 16)).sum().backward()
    optimizer.step()
    old = dict(model.named_parameters())
    moment = optimizer.state[old["0.weight"]]["exp_avg"].clone()
    replacement = torch.nn.Linear(16, 16)  # what a layer swap does: new parameters, same names
    with torch.no_grad():
        replacement.weight.copy_(model[0].weight)
        replacement.bias.copy_(model[0].bias)
    model[0] = replacement
    new = dict(model.named_parameters())
    repoint_optimizers([optimizer], old, new)
    held = optimizer.param_groups[0]["params"]
    assert [id(p) for p in held] == [id(p) for p in model.parameters()]
    assert all(id(p) in {id(q) for q in held} for p in new.values())
    assert torch.equal(optimizer.state[new["0.weight"]]["exp_avg"], moment)
    assert old["0.weight"] not in optimizer.state
    model(torch.randn(2, 16)).sum().backward()
    before = model[0].weight.detach().clone()
    optimizer.step()
    assert not torch.equal(before, model[0].weight)  # the new layer trains


def test_msamp_initialize_arguments_bind_to_the_documented_signature():
    model = torch.nn.Linear(16, 16)
    optimizer = torch.optim.AdamW(model.parameters())
    for opt_level in ("O1", "O2"):
        recipe = MSAMPRecipeKwargs(opt_level=opt_level)
        model_index, optimizer_index, kwargs = initialize_arguments(
            ["loader", model, optimizer], recipe.opt_level
        )
        assert (model_index, optimizer_index) == (1, 2)
        assert kwargs == {"model": model, "optimizer": optimizer, "opt_level": opt_level}
        inspect.signature(msamp_initialize).bind(**kwargs)
    assert MSAMPRecipeKwargs().opt_level == "O2"  # Accelerate's default
    assert initialize_arguments(["loader"], "O2") is None


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        (lambda m: [m], "pass both"),
        (lambda m: [m, torch.nn.Linear(2, 2), torch.optim.Adam(m.parameters())], "one model"),
        (lambda m: [m, torch.optim.SGD(m.parameters(), lr=0.1)], "only the Adam and AdamW"),
    ],
)
def test_msamp_refuses_what_it_cannot_cast(objects, message):
    with pytest.raises(ValueError, match=message):
        initialize_arguments(objects(torch.nn.Linear(16, 16)), "O2")


_NO_TE = "needs TransformerEngine's PyTorch extension and an FP8-capable NVIDIA GPU (Ada/Hopper)"
_NO_MSAMP = "needs MS-AMP (built from source, not on PyPI) and an NVIDIA GPU with CUDA"


@pytest.mark.skipif(not (torch.cuda.is_available() and te_available()), reason=_NO_TE)
def test_te_trains_on_a_gpu():  # pragma: no cover - runs only where TE and an FP8 GPU exist
    import transformer_engine.pytorch as te
    from accel import Accelerator

    accelerator = Accelerator(mixed_precision="fp8", kwargs_handlers=[TERecipeKwargs()])
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.LayerNorm(64), torch.nn.Linear(64, 32)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    assert isinstance(model[0], te.Linear) and isinstance(model[1], te.LayerNorm)
    held = {id(p) for g in optimizer.optimizer.param_groups for p in g["params"]}
    assert held == {id(p) for p in model.parameters()}
    x = torch.randn(32, 32, device=accelerator.device)
    losses = []
    for _ in range(10):
        loss = model(x).float().pow(2).mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    model.eval()
    with torch.no_grad():
        model(x)


@pytest.mark.skipif(not (torch.cuda.is_available() and is_msamp_available()), reason=_NO_MSAMP)
def test_msamp_trains_on_a_gpu():  # pragma: no cover - runs only where MS-AMP exists
    from accel import Accelerator

    accelerator = Accelerator(mixed_precision="fp8", kwargs_handlers=[MSAMPRecipeKwargs("O2")])
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Linear(64, 32))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    assert type(optimizer.optimizer).__name__ == "LBAdamW"
    x = torch.randn(32, 32, device=accelerator.device)
    loss = model(x).float().pow(2).mean()
    accelerator.backward(loss)
    optimizer.step()


def test_msamp_precision_scales_the_loss_and_casts_only_model_and_optimizer_together():
    from accel_fp8.precision import MSAMPPrecision

    precision = MSAMPPrecision(
        "fp8", torch.device("cpu"), {"MSAMPRecipeKwargs": MSAMPRecipeKwargs("O1")}
    )
    assert precision.recipe.opt_level == "O1" and precision.dtype == torch.bfloat16
    assert isinstance(precision.scaler, torch.amp.GradScaler)  # as Accelerate does for MS-AMP
    model = torch.nn.Linear(16, 16)
    assert precision.prepare(["loader"]) == ["loader"]
    with pytest.raises(ValueError, match="only the Adam and AdamW"):
        precision.prepare([model, torch.optim.SGD(model.parameters(), lr=0.1)])
    wrapped = precision.wrap_model(model)  # bf16 autocast only: no MS-AMP call for a lone model
    assert wrapped(torch.randn(2, 16)).dtype == torch.float32
    assert getattr(wrapped.forward, "_accel_precision", None) is precision
