"""What transformers' Trainer (5.x) needs of accel-deepspeed, in one process (no DeepSpeed engine).

``TrainingArguments(deepspeed=...)`` builds transformers' ``HfTrainerDeepSpeedConfig`` (a
subclass of our :class:`HfDeepSpeedConfig`, through ``accelerate.utils.deepspeed``), fills
its ``"auto"`` values, and hands it to ``DeepSpeedPlugin(hf_ds_config=...)``; the Trainer
later fills more values in it and calls ``accelerator.backward(loss, scale_wrt_gas=False)``.
The real 2-process run is integration-tests/deepspeed/test_trainer_zero2.py.
"""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace

import pytest
import torch
from accel.testing.fixtures import clean_accel_state  # noqa: F401  (autouse)
from accel_deepspeed import DeepSpeedEngineWrapper, DeepSpeedPlugin, HfDeepSpeedConfig

transformers_deepspeed = pytest.importorskip("transformers.integrations.deepspeed")
HfTrainerDeepSpeedConfig = transformers_deepspeed.HfTrainerDeepSpeedConfig

ZERO2_AUTO = {
    "fp16": {"enabled": "auto"},
    "bf16": {"enabled": "auto"},
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto"}},
    "scheduler": {
        "type": "WarmupDecayLR",
        "params": {"warmup_num_steps": "auto", "total_num_steps": "auto"},
    },
    "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"},
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
}


def training_args(**kwargs) -> SimpleNamespace:
    """The TrainingArguments fields HfTrainerDeepSpeedConfig reads (without making a process state)."""
    values = dict(
        world_size=2,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        max_grad_norm=1.0,
        learning_rate=5e-3,
        adam_beta1=0.9,
        adam_beta2=0.999,
        adam_epsilon=1e-8,
        weight_decay=0.01,
        save_on_each_node=False,
        fp16=False,
        fp16_full_eval=False,
        bf16=False,
        bf16_full_eval=False,
    )
    values.update(kwargs)
    args = SimpleNamespace(**values)
    args.get_warmup_steps = lambda steps: 1
    return args


@pytest.fixture(autouse=True)
def _no_transformers_weakref():
    yield
    transformers_deepspeed.unset_hf_deepspeed_config()


# -- 1. HfDeepSpeedConfig -----------------------------------------------------------
def test_hf_deepspeed_config_is_the_accelerate_name_transformers_subclasses():
    import accel.utils
    from accelerate.utils.deepspeed import HfDeepSpeedConfig as from_accelerate

    assert from_accelerate is HfDeepSpeedConfig is accel.utils.HfDeepSpeedConfig
    assert issubclass(HfTrainerDeepSpeedConfig, HfDeepSpeedConfig)


def test_hf_deepspeed_config_answers_like_accelerate(tmp_path):
    config = HfDeepSpeedConfig(
        {
            "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}},
            "bf16": {"enabled": "auto"},
            "fp16": {"enabled": False},
        }
    )
    assert config._stage == 3 and config._offload is True
    assert config.is_zero3() and not config.is_zero2() and config.is_offload()
    assert config.is_true("bf16.enabled")  # Accelerate: any set, truthy value
    assert config.is_false("fp16.enabled") and not config.is_true("fp16.enabled")
    assert not config.is_true("missing.key") and not config.is_false("missing.key")
    node, key = config.find_config_node("zero_optimization.offload_param.device")
    assert node == {"device": "cpu"} and key == "device"
    assert config.find_config_node("no.such.key") == (None, "key")
    # the stage and offload follow the config as it is edited
    config.config["zero_optimization"]["stage"] = 1
    assert config._stage == 1 and not config.is_offload()
    config.del_config_sub_tree("zero_optimization.offload_param")
    assert config.get_value("zero_optimization.offload_param") is None
    with pytest.raises(ValueError, match="not in the DeepSpeed config"):
        config.del_config_sub_tree("optimizer", must_exist=True)
    assert HfDeepSpeedConfig({})._stage == -1
    # ZeRO-1 offload does not count (Accelerate's rule)
    one = {"zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}}}
    assert not HfDeepSpeedConfig(one).is_offload()
    # a JSON file, JSON text and base64-encoded JSON all load
    text = json.dumps({"zero_optimization": {"stage": 2}})
    (tmp_path / "ds.json").write_text(text)
    for source in (
        tmp_path / "ds.json",
        str(tmp_path / "ds.json"),
        text,
        base64.urlsafe_b64encode(text.encode()).decode(),
    ):
        assert HfDeepSpeedConfig(source).is_zero2(), source
    with pytest.raises(ValueError, match="does not exist and is not JSON"):
        HfDeepSpeedConfig(str(tmp_path / "missing.json"))


def test_transformers_trainer_config_fills_its_autos_through_our_base_class():
    config = HfTrainerDeepSpeedConfig(ZERO2_AUTO)
    assert config.config is not ZERO2_AUTO and ZERO2_AUTO["train_batch_size"] == "auto"
    assert config._stage == 2 and config._offload is False  # Accelerate's attributes
    config.trainer_config_process(training_args())
    assert config.dtype() is torch.float32
    assert config.get_value("train_batch_size") == 16 and config.is_false("bf16.enabled")
    model = SimpleNamespace(config=SimpleNamespace(hidden_size=8))
    config.trainer_config_finalize(training_args(), model, num_training_steps=6)
    assert config.get_value("zero_optimization.reduce_bucket_size") == 64
    assert config.get_value("scheduler.params.total_num_steps") == 6
    assert "auto" not in json.dumps(config.config)
    assert transformers_deepspeed.deepspeed_config() is config.config


# -- 2. DeepSpeedPlugin(hf_ds_config=<transformers' object>) ------------------------
def test_plugin_keeps_the_trainers_config_object_and_dict():
    hf_config = HfTrainerDeepSpeedConfig(ZERO2_AUTO)
    hf_config.trainer_config_process(training_args())
    plugin = DeepSpeedPlugin(hf_ds_config=hf_config)
    assert plugin.hf_ds_config is hf_config
    assert plugin.deepspeed_config is hf_config.config
    assert plugin.hf_ds_config.dtype() is torch.float32  # Trainer._prepare_input asks it
    assert plugin.zero_stage == 2 and plugin.gradient_accumulation_steps is None
    # what the Trainer fills later (deepspeed_init -> trainer_config_finalize) reaches the plugin
    model = SimpleNamespace(config=SimpleNamespace(hidden_size=8))
    plugin.hf_ds_config.trainer_config_finalize(training_args(), model, num_training_steps=6)
    assert plugin.get_value("scheduler.params.total_num_steps") == 6
    assert plugin.deepspeed_config["zero_optimization"]["reduce_bucket_size"] == 64


def test_plugin_from_a_dict_or_path_does_not_change_the_callers_dict(tmp_path):
    plugin = DeepSpeedPlugin(hf_ds_config=ZERO2_AUTO, gradient_clipping=0.5)
    assert plugin.deepspeed_config is plugin.hf_ds_config.config
    assert plugin.deepspeed_config["gradient_clipping"] == 0.5
    assert ZERO2_AUTO["gradient_clipping"] == "auto"
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(ZERO2_AUTO))
    assert DeepSpeedPlugin(hf_ds_config=str(path)).hf_ds_config.is_zero2()


def test_set_mixed_precision_fill_match_and_process():
    plugin = DeepSpeedPlugin(zero_stage=2)
    plugin.set_mixed_precision("bf16")
    assert plugin.deepspeed_config["bf16"] == {"enabled": True}
    assert plugin.deepspeed_config["fp16"] == {"enabled": False}
    with pytest.raises(ValueError, match="enables bf16"):
        plugin.set_mixed_precision("fp16")
    auto = DeepSpeedPlugin(hf_ds_config=ZERO2_AUTO)
    auto.set_mixed_precision("no")
    assert auto.get_value("bf16.enabled") is False and auto.get_value("fp16.enabled") is False

    plugin = DeepSpeedPlugin(hf_ds_config=ZERO2_AUTO)
    mismatches: list[str] = []
    plugin.fill_match(
        "train_micro_batch_size_per_gpu", mismatches, **{"train_micro_batch_size_per_gpu": 4}
    )
    assert plugin.get_value("train_micro_batch_size_per_gpu") == 4
    plugin.fill_match(
        "train_micro_batch_size_per_gpu", mismatches, **{"train_micro_batch_size_per_gpu": 8}
    )
    assert mismatches == [
        "- ds train_micro_batch_size_per_gpu=4 vs arg train_micro_batch_size_per_gpu=8"
    ]
    with pytest.raises(ValueError, match="train_batch_size is auto"):
        plugin.fill_match("train_batch_size")
    plugin.deepspeed_config_process(
        must_match=False,
        **{
            "train_batch_size": 16,
            "gradient_accumulation_steps": 2,
            "gradient_clipping": 1.0,
            "fp16.enabled": False,
            "bf16.enabled": False,
            "optimizer.params.lr": 1e-3,
            "optimizer.params.weight_decay": 0.0,
            "scheduler.params.warmup_num_steps": 1,
            "scheduler.params.total_num_steps": 10,
            "zero_optimization.reduce_bucket_size": 64,
        },
    )
    assert "auto" not in json.dumps(plugin.deepspeed_config)
    with pytest.raises(ValueError, match="gradient_clipping=1.0 vs arg gradient_clipping=2.0"):
        plugin.deepspeed_config_process(gradient_clipping=2.0)


def test_select_and_weakref_tell_transformers_about_the_config():
    plugin = DeepSpeedPlugin(zero_stage=3, zero3_init_flag=True)
    assert plugin.is_zero3_init_enabled() is True and plugin.selected is False
    with pytest.raises(ValueError):
        plugin.select()
    plugin.select(_from_accelerator_state=True)
    assert plugin.selected is True
    assert transformers_deepspeed.is_deepspeed_zero3_enabled()
    told = transformers_deepspeed.deepspeed_config()
    assert told["train_micro_batch_size_per_gpu"] == 1 and "train_batch_size" not in told
    assert plugin.deepspeed_config["train_micro_batch_size_per_gpu"] == "auto"  # a copy was told
    assert DeepSpeedPlugin(zero_stage=2).is_zero3_init_enabled() is False


def test_zero3_init_context_manager_enable_false_builds_a_whole_model():
    plugin = DeepSpeedPlugin(zero_stage=3, zero3_init_flag=True)
    plugin.set_deepspeed_weakref()
    with plugin.zero3_init_context_manager(enable=False):
        assert plugin.is_zero3_init_enabled() is False
        layer = torch.nn.Linear(4, 4)
    assert plugin.is_zero3_init_enabled() is True
    assert layer.weight.numel() == 16 and not hasattr(layer.weight, "ds_id")


# -- 3. accelerator.backward(loss, scale_wrt_gas=False) -----------------------------
class FakeEngine(torch.nn.Module):
    """Records what the backend asks of a DeepSpeed engine; the loss the engine would scale."""

    def __init__(self, steps: int):
        super().__init__()
        self.module = torch.nn.Linear(2, 1)
        self.steps = steps
        self.calls: list[tuple[str, object]] = []

    def set_gradient_accumulation_boundary(self, is_boundary: bool) -> None:
        self.calls.append(("boundary", is_boundary))

    def backward(self, loss, retain_graph=False, scale_wrt_gas=True):
        effective = loss / self.steps if scale_wrt_gas else loss
        self.calls.append(("backward", (round(effective.item(), 6), retain_graph)))

    def step(self) -> None:
        self.calls.append(("step", None))


def test_engine_wrapper_passes_keyword_arguments_to_engine_backward():
    engine = FakeEngine(steps=2)
    DeepSpeedEngineWrapper(engine).backward(torch.tensor(8.0), scale_wrt_gas=False)
    DeepSpeedEngineWrapper(engine).backward(
        torch.tensor(8.0), sync_gradients=False, retain_graph=True
    )
    assert engine.calls == [
        ("boundary", True),
        ("backward", (8.0, False)),
        ("step", None),
        ("boundary", False),
        ("backward", (4.0, True)),
    ]


@pytest.fixture
def deepspeed_accelerator(monkeypatch):
    for name in ("DS_ACCELERATOR", "LOCAL_RANK", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACCEL_USE_CPU", "1")
    from accel import Accelerator

    accelerator = Accelerator(
        deepspeed_plugin=DeepSpeedPlugin(zero_stage=2), gradient_accumulation_steps=2
    )
    yield accelerator
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def test_accelerator_backward_with_scale_wrt_gas_and_kwargs(deepspeed_accelerator):
    accelerator = deepspeed_accelerator
    engine = FakeEngine(steps=accelerator.gradient_accumulation_steps)
    accelerator.backend.engines.append(engine)
    accelerator.sync_gradients = True
    # the Trainer divides the loss itself and asks for no scaling: the engine gets the loss as is
    accelerator.backward(torch.tensor(8.0), scale_wrt_gas=False)
    # Accelerate's default: the loss is divided by the accumulation steps (here 2), once
    accelerator.backward(torch.tensor(8.0), retain_graph=True)
    backwards = [value for kind, value in engine.calls if kind == "backward"]
    assert backwards == [(8.0, False), (4.0, True)]
    assert [kind for kind, _ in engine.calls].count("step") == 2


# -- 4. Accelerator.deepspeed_ulysses_dl_adapter ------------------------------------
def test_ulysses_dl_adapter_is_a_no_op_without_sequence_parallelism(deepspeed_accelerator):
    from accel_deepspeed.sequence_parallel import ulysses_dl_adapter

    loader = torch.utils.data.DataLoader(list(range(4)), batch_size=2)
    assert ulysses_dl_adapter(deepspeed_accelerator, loader, None) is loader
    assert deepspeed_accelerator.backend.deepspeed_ulysses_dl_adapter(loader, None) is loader


def test_ulysses_dl_adapter_cuts_an_unprepared_loader_once():
    from accel_deepspeed.sequence_parallel import (
        SequenceParallelLayout,
        SequenceSlicingCollate,
        ulysses_dl_adapter,
    )

    handler = SimpleNamespace(sp_seq_length_is_variable=True, sp_seq_length=None)
    accelerator = SimpleNamespace(
        backend=SimpleNamespace(sequence_parallel=SequenceParallelLayout(2, 2, 1)),
        state=SimpleNamespace(parallelism_config=SimpleNamespace(sp_handler=handler)),
    )
    samples = [{"input_ids": torch.arange(4), "labels": torch.arange(4)} for _ in range(2)]
    loader = torch.utils.data.DataLoader(samples, batch_size=2)
    adapted = ulysses_dl_adapter(accelerator, loader, None)
    assert isinstance(adapted.collate_fn, SequenceSlicingCollate)
    assert ulysses_dl_adapter(accelerator, adapted, None).collate_fn is adapted.collate_fn
    batch = next(iter(adapted))
    assert batch["input_ids"].tolist() == [[2, 3], [2, 3]]  # rank 1's half of the sequence
    assert batch["shift_labels"].tolist() == [[3, -100], [3, -100]]


def test_zero3_init_reads_the_mixed_precision_of_its_accelerator_context(monkeypatch):
    """The plugin reads the run's mixed precision from the backend context it was attached to,
    not from the process-wide state: a plugin no Accelerator uses stays fp32."""
    for name in ("DS_ACCELERATOR", "LOCAL_RANK", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACCEL_USE_CPU", "1")
    from accel import Accelerator

    plugin = DeepSpeedPlugin(zero_stage=3, zero3_init_flag=True)
    other = DeepSpeedPlugin(zero_stage=3, zero3_init_flag=True)
    try:
        accelerator = Accelerator(deepspeed_plugin=plugin, mixed_precision="bf16")
        assert plugin._run is accelerator.backend_context
        assert plugin._zero_init_config()["bf16"] == {"enabled": True}
        assert other._zero_init_config()["bf16"] == {"enabled": False}
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
