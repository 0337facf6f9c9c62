"""torchao float8 training for real on the CPU (torchao 0.18 runs float8 eagerly): a small
transformer block trains through the Accelerator; which layers become FP8."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from accel import Accelerator
from accel_fp8 import AORecipeKwargs, FP8RecipeKwargs

pytest.importorskip("torchao.float8", reason="the torchao backend needs torchao (accel-fp8[ao])")
from torchao.float8.float8_linear import Float8Linear  # noqa: E402

HIGH_PRECISION = ("inp", "head", "odd", "odd_back")
FP8 = ("qkv", "proj", "fc1", "fc2")


class Block(torch.nn.Module):
    """Input projection, pre-norm attention and MLP, an odd-sized detour, and a head."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = torch.nn.Linear(16, 64)  # first Linear: stays high precision
        self.norm1 = torch.nn.LayerNorm(64)
        self.qkv = torch.nn.Linear(64, 192)
        self.proj = torch.nn.Linear(64, 64)
        self.norm2 = torch.nn.LayerNorm(64)
        self.fc1 = torch.nn.Linear(64, 128)
        self.fc2 = torch.nn.Linear(128, 64)
        self.odd = torch.nn.Linear(64, 24)  # sizes the FP8 kernels cannot take
        self.odd_back = torch.nn.Linear(24, 64)
        self.head = torch.nn.Linear(64, 4)  # last Linear: stays high precision

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, 4, d // 4).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(attended)
        x = x + self.fc2(F.gelu(self.fc1(self.norm2(x))))
        x = x + self.odd_back(F.relu(self.odd(x)))
        return self.head(x.mean(dim=1))


def _kinds(model: torch.nn.Module) -> dict[str, str]:
    return {name: type(getattr(model, name)).__name__ for name in HIGH_PRECISION + FP8}


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(16, 16, 16, generator=generator), torch.randn(16, 4, generator=generator)


def test_a_transformer_block_trains_in_fp8_with_first_and_last_linear_kept():
    torch.manual_seed(0)
    accelerator = Accelerator(mixed_precision="fp8", cpu=True, kwargs_handlers=[AORecipeKwargs()])
    assert accelerator.precision.fp8_backend == "AO"
    model = Block()
    reference = copy.deepcopy(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    kinds = _kinds(model)
    assert all(kinds[n] == "Linear" for n in HIGH_PRECISION), kinds
    assert all(kinds[n] == "Float8Linear" for n in FP8), kinds
    # the optimizer still holds the model's parameters (torchao keeps them)
    held = {id(p) for g in optimizer.optimizer.param_groups for p in g["params"]}
    assert held == {id(p) for p in model.parameters()}

    x, y = _data()
    with torch.no_grad():  # FP8 really quantises: close to, but not equal to, the fp32 model
        ours, theirs = model(x), reference(x)
    assert ours.dtype == torch.float32 and not torch.equal(ours, theirs)
    assert torch.allclose(ours, theirs, atol=0.1, rtol=0.1)

    losses = []
    for _ in range(12):
        loss = F.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses
    assert (
        accelerator.unwrap_model(model, keep_fp32_wrapper=False).forward.__func__ is Block.forward
    )


def test_the_module_filter_is_honoured_but_not_past_the_kernel_sizes():
    chosen = []

    def only(module: torch.nn.Module, fqn: str) -> bool:
        chosen.append(fqn)
        return fqn in ("inp", "fc1", "odd")

    accelerator = Accelerator(
        mixed_precision="fp8",
        cpu=True,
        kwargs_handlers=[FP8RecipeKwargs(backend="ao", module_filter_func=only)],
    )
    model = accelerator.prepare(Block())
    kinds = _kinds(model)
    assert kinds["inp"] == kinds["fc1"] == "Float8Linear"  # the user's filter wins over first/last
    assert kinds["odd"] == "Linear"  # 64 -> 24 cannot be FP8 whatever the filter says
    assert all(kinds[n] == "Linear" for n in ("qkv", "proj", "fc2", "head"))
    assert {"inp", "qkv", "fc1"} <= set(chosen) and "head" not in chosen  # 64 -> 4: never FP8
    x, _ = _data()
    assert model(x).shape == (16, 4)


def test_auto_selection_and_evaluation_mode():
    from accel_fp8 import is_msamp_available, is_transformer_engine_available

    if is_msamp_available() or is_transformer_engine_available():
        pytest.skip("MS-AMP or TransformerEngine is installed: the automatic choice is not torchao")
    accelerator = Accelerator(mixed_precision="fp8", cpu=True)
    assert accelerator.precision.fp8_backend == "AO"  # the only backend installed here
    model = accelerator.prepare_model(Block(), evaluation_mode=True)
    assert _kinds(model)["fc1"] == "Float8Linear" and _kinds(model)["head"] == "Linear"
    with torch.no_grad():
        assert model(_data()[0]).shape == (16, 4)


def test_a_user_float8_config_is_used():
    from torchao.float8 import Float8LinearConfig

    config = Float8LinearConfig(emulate=True)
    accelerator = Accelerator(
        mixed_precision="fp8", cpu=True, kwargs_handlers=[AORecipeKwargs(config=config)]
    )
    model = accelerator.prepare(Block())
    assert isinstance(model.fc1, Float8Linear) and model.fc1.config is config
    assert model(_data()[0]).shape == (16, 4)


@pytest.mark.parametrize(("distributed_type", "version"), [("NO", None), ("FSDP", 2), ("FSDP", 1)])
def test_fsdp2_float8_all_gather_is_the_default_only_under_fsdp2(
    monkeypatch, distributed_type, version
):
    from accel.state import AcceleratorState
    from accel_fp8.precision import AOPrecision

    state = AcceleratorState(cpu=True)
    monkeypatch.setattr(state, "distributed_type", distributed_type)
    plugins = {"fsdp_plugin": type("Plugin", (), {"fsdp_version": version})()} if version else {}
    monkeypatch.setattr(state, "plugins", plugins)
    from accel.backends import BackendContext
    from accel.kwargs import DataLoaderConfiguration
    from accel.prepared import PreparedObjects
    from accel.state import GradientState

    precision = AOPrecision("fp8", torch.device("cpu"), {})
    # the precision reads the run through its context (never the process-wide state)
    context = BackendContext(
        state, GradientState(), DataLoaderConfiguration(), {}, PreparedObjects(), precision
    )
    assert precision.context is context
    model = Block()
    optimizer = torch.optim.AdamW(model.parameters())
    precision.prepare([model, optimizer])
    expected = version == 2
    assert model.fc1.config.enable_fsdp_float8_all_gather is expected
    assert bool(optimizer._optimizer_step_post_hooks) is expected  # scales precomputed per step
    F.mse_loss(model(_data()[0]), _data()[1]).backward()
    optimizer.step()  # the hook waits for an FSDP2-sharded model; a plain one is left alone


@pytest.mark.parametrize("distributed_type", ["FSDP", "DEEPSPEED", "MEGATRON_LM"])
def test_msamp_refuses_every_strategy_of_the_catalog(monkeypatch, distributed_type):
    """MS-AMP runs on one process or DDP: binding it to a strategy's context is refused."""
    from accel.backends import BackendContext
    from accel.kwargs import DataLoaderConfiguration
    from accel.prepared import PreparedObjects
    from accel.state import AcceleratorState, GradientState
    from accel_fp8.precision import MSAMPPrecision

    state = AcceleratorState(cpu=True)
    monkeypatch.setattr(state, "distributed_type", distributed_type)
    precision = MSAMPPrecision("fp8", torch.device("cpu"), {})
    with pytest.raises(NotImplementedError, match=f"MS-AMP with {distributed_type} is not"):
        BackendContext(
            state, GradientState(), DataLoaderConfiguration(), {}, PreparedObjects(), precision
        )
