"""The Accelerator's API on one process: prepare, process helpers, logging, seeding, models, metrics."""

from __future__ import annotations

import itertools
import logging
import random

import numpy as np
import pytest
import torch
from accel import Accelerator, DistributedType, PartialState, TorchDynamoPlugin
from accel.data.loader import DataLoaderShard
from accel.logging import get_logger
from accel.optimizer import AcceleratedOptimizer
from accel.scheduler import AcceleratedScheduler
from accel.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def _objects():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    loader = DataLoader(TensorDataset(torch.randn(8, 3)), batch_size=4)
    return {"model": model, "optimizer": optimizer, "scheduler": scheduler, "loader": loader}


_KINDS = {
    "model": nn.Module,
    "optimizer": AcceleratedOptimizer,
    "scheduler": AcceleratedScheduler,
    "loader": DataLoaderShard,
}


# -- identity -----------------------------------------------------------------------------


def test_single_process_identity(capsys):
    accelerator = Accelerator(cpu=True)
    assert accelerator.distributed_type == DistributedType.NO
    assert accelerator.device == torch.device("cpu")
    assert accelerator.num_processes == 1
    assert accelerator.process_index == 0 and accelerator.local_process_index == 0
    assert accelerator.is_main_process and accelerator.is_local_main_process
    assert accelerator.is_last_process
    assert not accelerator.use_distributed
    accelerator.wait_for_everyone()  # no process group: returns at once
    accelerator.print("hello", 1)
    assert capsys.readouterr().out == "hello 1\n"


# -- prepare --------------------------------------------------------------------------------


@pytest.mark.parametrize("order", list(itertools.permutations(_KINDS)), ids="-".join)
def test_prepare_returns_objects_in_the_order_given(order):
    accelerator = Accelerator(cpu=True)
    objects = _objects()
    result = accelerator.prepare(*(objects[k] for k in order))
    assert len(result) == len(order)
    prepared = dict(zip(order, result))
    for kind, obj in prepared.items():
        assert isinstance(obj, _KINDS[kind]), kind
    assert prepared["model"] is objects["model"]  # one process: the model itself
    assert prepared["optimizer"].optimizer is objects["optimizer"]
    assert prepared["scheduler"].scheduler is objects["scheduler"]
    # the scheduler is linked to the prepared optimizer, whatever the order
    assert any(o is prepared["optimizer"] for o in prepared["scheduler"].optimizers)
    assert [b[0].shape[0] for b in prepared["loader"]] == [4, 4]


def test_scheduler_is_linked_only_to_its_optimizer():
    accelerator = Accelerator(cpu=True)
    objects = _objects()
    optimizer, scheduler = accelerator.prepare(objects["optimizer"], objects["scheduler"])
    assert scheduler.optimizers == [optimizer]


def test_prepare_any_number_of_objects():
    accelerator = Accelerator(cpu=True)
    first, second = _objects(), _objects()
    single = accelerator.prepare(first["model"])
    assert single is first["model"]  # one object: not a tuple
    result = accelerator.prepare(
        second["loader"], first["optimizer"], second["model"], second["optimizer"], "passthrough"
    )
    assert isinstance(result[0], DataLoaderShard)
    assert result[1].optimizer is first["optimizer"]
    assert result[2] is second["model"]
    assert result[3].optimizer is second["optimizer"]
    assert result[4] == "passthrough"  # what prepare does not know is returned as is
    assert len(accelerator._models) == 2 and len(accelerator._optimizers) == 2


def test_prepared_batches_are_on_the_device():
    accelerator = Accelerator(cpu=True)
    loader = accelerator.prepare(DataLoader(TensorDataset(torch.arange(6)), batch_size=2))
    assert all(b.device == accelerator.device for (b,) in loader)
    assert len(loader) == 3


# -- process helpers ----------------------------------------------------------------------------


def test_process_decorators_on_one_process():
    accelerator = Accelerator(cpu=True)
    ran = []

    @accelerator.on_main_process
    def main():
        ran.append("main")
        return "main"

    @accelerator.on_local_main_process
    def local_main():
        ran.append("local_main")

    @accelerator.on_last_process
    def last():
        ran.append("last")

    @accelerator.on_process(process_index=0)
    def zero():
        ran.append("zero")

    @accelerator.on_process(process_index=1)
    def one():
        ran.append("one")

    @accelerator.on_local_process(local_process_index=0)
    def local_zero():
        ran.append("local_zero")

    assert main() == "main"
    local_main(), last(), zero(), local_zero()
    assert one() is None
    assert ran == ["main", "local_main", "last", "zero", "local_zero"]
    with accelerator.main_process_first():
        ran.append("first")
    with accelerator.local_main_process_first():
        ran.append("local_first")
    assert ran[-2:] == ["first", "local_first"]
    with pytest.raises(ValueError, match="process_index"):
        accelerator.on_process()


@pytest.fixture
def as_rank_one_of_two():
    """This process's state says rank 1 of 2 (no process group: barriers are no-ops)."""
    accelerator = Accelerator(cpu=True)
    state = PartialState()
    state.process_index = state.local_process_index = 1
    state.num_processes = 2
    return accelerator


def test_process_decorators_on_another_rank(as_rank_one_of_two):
    accelerator = as_rank_one_of_two
    ran = []
    accelerator.on_main_process(lambda: ran.append("main"))()
    accelerator.on_last_process(lambda: ran.append("last"))()
    accelerator.on_process(lambda: ran.append("one"), process_index=1)()
    accelerator.on_process(lambda: ran.append("zero"), process_index=0)()
    assert ran == ["last", "one"]


def test_trigger():
    accelerator = Accelerator(cpu=True)
    assert not accelerator.check_trigger()
    accelerator.set_trigger()
    assert accelerator.check_trigger()
    assert not accelerator.check_trigger()  # checking resets it


# -- logging -------------------------------------------------------------------------------------


def _messages(caplog, name):
    return [r.getMessage() for r in caplog.records if r.name == name]


def test_get_logger_on_the_main_process(caplog):
    Accelerator(cpu=True)
    logger = get_logger("accel.tests.main")
    with caplog.at_level(logging.INFO, logger="accel.tests.main"):
        logger.info("default")
        logger.info("everywhere", main_process_only=False)
        logger.info("ordered", in_order=True)
        logger.debug("too low")
    assert _messages(caplog, "accel.tests.main") == ["default", "everywhere", "ordered"]
    # the record points at the caller, not at the adapter
    assert {r.filename for r in caplog.records} == {"test_accelerator_api.py"}


def test_get_logger_on_another_rank(caplog, as_rank_one_of_two):
    logger = get_logger("accel.tests.rank1")
    with caplog.at_level(logging.INFO, logger="accel.tests.rank1"):
        logger.info("main only")
        logger.info("everywhere", main_process_only=False)
        logger.info("ordered", in_order=True)
    assert _messages(caplog, "accel.tests.rank1") == ["everywhere", "ordered"]


def test_get_logger_before_any_state(caplog):
    logger = get_logger("accel.tests.early")
    with caplog.at_level(logging.WARNING, logger="accel.tests.early"):
        logger.warning("before the Accelerator")
        logger.warning_once("once")
        logger.warning_once("once")
    assert _messages(caplog, "accel.tests.early") == ["before the Accelerator", "once"]


def test_get_logger_log_level(monkeypatch):
    root_level = logging.getLogger().level
    try:
        assert get_logger("accel.tests.level", log_level="ERROR").logger.level == logging.ERROR
        monkeypatch.setenv("ACCEL_LOG_LEVEL", "debug")
        assert get_logger("accel.tests.level_env").logger.level == logging.DEBUG
    finally:
        logging.getLogger().setLevel(root_level)


# -- seeding -----------------------------------------------------------------------------------------


def _draw():
    return random.random(), float(np.random.rand()), torch.rand(3), nn.Linear(2, 2).weight.detach()


def test_set_seed_is_reproducible():
    set_seed(42)
    a = _draw()
    set_seed(42)
    b = _draw()
    set_seed(43)
    c = _draw()
    assert a[0] == b[0] and a[1] == b[1]
    assert torch.equal(a[2], b[2]) and torch.equal(a[3], b[3])
    assert a[0] != c[0] and a[1] != c[1] and not torch.equal(a[2], c[2])


# -- models --------------------------------------------------------------------------------------------


def test_unwrap_model_can_remove_the_mixed_precision_forward():
    accelerator = Accelerator(mixed_precision="bf16", cpu=True)
    torch.manual_seed(0)
    original = nn.Sequential(nn.Linear(4, 4))
    plain_forward = original.forward
    model = accelerator.prepare(original)
    seen = []
    model[0].register_forward_hook(lambda _m, _i, out: seen.append(out.dtype))
    x = torch.randn(2, 4)

    kept = accelerator.unwrap_model(model)  # keep_fp32_wrapper=True by default
    kept(x)
    assert seen == [torch.bfloat16]

    unwrapped = accelerator.unwrap_model(model, keep_fp32_wrapper=False)
    assert unwrapped is original
    assert "forward" not in unwrapped.__dict__
    assert unwrapped.forward == plain_forward
    unwrapped(x)
    assert seen == [torch.bfloat16, torch.float32]


def test_get_state_dict_has_the_models_own_keys():
    accelerator = Accelerator(mixed_precision="bf16", cpu=True)
    torch.manual_seed(0)
    original = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))
    expected = {k: v.clone() for k, v in original.state_dict().items()}
    model = accelerator.prepare(original)
    state = accelerator.get_state_dict(model)
    assert list(state) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert all(torch.equal(state[k], v) for k, v in expected.items())


def test_unwrap_model_of_a_compiled_model():
    accelerator = Accelerator(cpu=True, dynamo_backend="eager")
    torch.manual_seed(0)
    original = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))
    keys = list(original.state_dict())
    model = accelerator.prepare(original)
    assert model is not original and model._orig_mod is original  # wrapped by torch.compile
    # as in Accelerate, keep_torch_compile=True (the default) keeps the compiled wrapper
    assert accelerator.unwrap_model(model) is model
    assert list(accelerator.get_state_dict(model)) == [f"_orig_mod.{k}" for k in keys]
    unwrapped = accelerator.unwrap_model(model, keep_torch_compile=False)
    assert unwrapped is original
    assert list(accelerator.get_state_dict(unwrapped)) == keys


def test_regional_compilation_keeps_state_dict_keys():
    class Blocks(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))
            self.head = nn.Linear(4, 1)

        def forward(self, x):
            for block in self.blocks:
                x = torch.relu(block(x))
            return self.head(x)

    torch.manual_seed(0)
    model = Blocks()
    keys = list(model.state_dict())
    plugin = TorchDynamoPlugin(backend="inductor", use_regional_compilation=True)
    accelerator = Accelerator(cpu=True, dynamo_plugin=plugin)
    prepared = accelerator.prepare(model)
    assert prepared is model
    assert list(prepared.state_dict()) == keys
    assert list(accelerator.get_state_dict(prepared)) == keys
    assert all(block._compiled_call_impl is not None for block in prepared.blocks)
    assert prepared.head._compiled_call_impl is None  # only the repeated blocks


@pytest.mark.timeout(120)
def test_regional_compilation_runs_with_the_eager_backend():
    torch.manual_seed(0)
    model = nn.ModuleDict({"blocks": nn.ModuleList(nn.Linear(4, 4) for _ in range(2))})
    x = torch.randn(2, 4)
    expected = model["blocks"][1](model["blocks"][0](x))
    plugin = TorchDynamoPlugin(backend="eager", use_regional_compilation=True)
    accelerator = Accelerator(cpu=True, dynamo_plugin=plugin)
    model = accelerator.prepare(model)
    out = model["blocks"][1](model["blocks"][0](x))
    torch.testing.assert_close(out, expected)


def test_accumulate_enters_the_models_own_no_sync_on_accumulating_steps():
    import contextlib

    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=2)
    entered = []

    class WithNoSync(nn.Linear):
        @contextlib.contextmanager
        def no_sync(self):
            entered.append(accelerator.step)
            yield

    model = WithNoSync(2, 2)
    for _ in range(4):
        with accelerator.accumulate(model):
            assert accelerator.sync_gradients == (accelerator.step % 2 == 0)
    assert entered == [1, 3]  # the accumulating micro-batches only
    with accelerator.accumulate(nn.Linear(2, 2)):  # no no_sync of its own: nothing to enter
        assert not accelerator.sync_gradients
    assert entered == [1, 3]


# -- metrics --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shuffle", [False, True])
def test_gather_for_metrics_returns_every_sample_once(shuffle):
    accelerator = Accelerator(cpu=True)
    loader = accelerator.prepare(
        DataLoader(TensorDataset(torch.arange(10)), batch_size=4, shuffle=shuffle)
    )
    gathered = [accelerator.gather_for_metrics(batch) for (batch,) in loader]
    assert [len(g) for g in gathered] == [4, 4, 2]
    assert sorted(torch.cat(gathered).tolist()) == list(range(10))


def test_gather_for_metrics_with_objects():
    accelerator = Accelerator(cpu=True)
    loader = accelerator.prepare(DataLoader(list(range(10)), batch_size=4))
    gathered = []
    for batch in loader:
        gathered.extend(accelerator.gather_for_metrics([f"s{i}" for i in batch.tolist()]))
    assert gathered == [f"s{i}" for i in range(10)]


def test_gather_for_metrics_of_a_tensor_list_as_objects():
    """use_gather_object=True on a list of 0-dim tensors: the last round is cut as a list."""
    accelerator = Accelerator(cpu=True)
    loader = accelerator.prepare(DataLoader(torch.arange(5), batch_size=2))
    gathered = []
    for batch in loader:
        gathered.extend(accelerator.gather_for_metrics(list(batch), use_gather_object=True))
    assert [int(t) for t in gathered] == list(range(5))


# -- gradient clipping ---------------------------------------------------------------------------------


def _with_grads(accelerator, scale=100.0):
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.backward(model(torch.randn(5, 4)).sum() * scale)
    return model, optimizer


def _total_norm(model):
    return torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))


def test_clip_grad_norm_returns_the_norm_and_clips():
    accelerator = Accelerator(cpu=True)
    model, _ = _with_grads(accelerator)
    expected = _total_norm(model)
    assert expected > 1.0
    norm = accelerator.clip_grad_norm_(model.parameters(), max_norm=1.0)
    torch.testing.assert_close(norm, expected)
    torch.testing.assert_close(_total_norm(model), torch.tensor(1.0), rtol=1e-4, atol=1e-4)


def test_clip_grad_norm_unscales_fp16_gradients_once():
    accelerator = Accelerator(mixed_precision="fp16", cpu=True)
    model, optimizer = _with_grads(accelerator, scale=0.01)
    scale = accelerator.scaler.get_scale()
    true_norm = _total_norm(model) / scale
    before = model.weight.detach().clone()
    norm = accelerator.clip_grad_norm_(model.parameters(), max_norm=0.01)
    torch.testing.assert_close(norm, true_norm, rtol=1e-3, atol=1e-6)  # the unscaled norm
    clipped = model.weight.grad.clone()
    optimizer.step()
    assert not accelerator.optimizer_step_was_skipped
    # the step used the clipped gradient, not a second unscale of it
    torch.testing.assert_close(model.weight.detach(), before - clipped)


def test_clip_grad_value_():
    accelerator = Accelerator(cpu=True)
    model, _ = _with_grads(accelerator)
    assert max(p.grad.abs().max() for p in model.parameters()) > 0.5
    accelerator.clip_grad_value_(model.parameters(), clip_value=0.5)
    assert max(p.grad.abs().max() for p in model.parameters()) == pytest.approx(0.5)
