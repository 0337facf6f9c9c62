"""DeepSpeedPlugin validation and ``auto`` filling, in one process (no engine)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from accel.errors import ConfigError
from accel_deepspeed import DeepSpeedPlugin, HfDeepSpeedConfig
from accel_deepspeed.auto import AutoContext, fill_auto
from accel_deepspeed.config import validate_section

SEED_CONFIGS = Path(__file__).parents[3] / "integration-tests" / "deepspeed" / "configs"


def test_fields_build_a_config():
    plugin = DeepSpeedPlugin(
        zero_stage=3,
        offload_optimizer_device="cpu",
        offload_param_device="nvme",
        offload_param_nvme_path="/nvme",
        zero3_save_16bit_model=True,
        gradient_clipping=0.5,
        gradient_accumulation_steps=4,
        zero3_init_flag="true",
    )
    zero = plugin.deepspeed_config["zero_optimization"]
    assert zero["stage"] == 3
    assert zero["offload_optimizer"] == {"device": "cpu"}
    assert zero["offload_param"] == {"device": "nvme", "nvme_path": "/nvme"}
    assert zero["stage3_gather_16bit_weights_on_model_save"] is True
    assert plugin.deepspeed_config["gradient_clipping"] == 0.5
    assert plugin.deepspeed_config["gradient_accumulation_steps"] == 4
    assert plugin.deepspeed_config["train_micro_batch_size_per_gpu"] == "auto"
    assert plugin.zero3_init_flag is True and plugin.hf_ds_config.is_zero3()
    assert plugin.hf_ds_config.is_offload()
    assert DeepSpeedPlugin().zero_stage == 2  # the default
    assert DeepSpeedPlugin(zero_stage=2, zero3_init_flag=True).zero3_init_flag is False


def test_launched_section_fills_unset_fields(monkeypatch):
    section = {
        "zero_stage": 3,
        "offload_optimizer_device": "cpu",
        "offload_param_device": "cpu",
        "zero3_init_flag": True,
        "zero3_save_16bit_model": True,
        "gradient_clipping": 1.0,
        "deepspeed_moe_layer_cls_names": "MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock",
    }
    monkeypatch.setenv("ACCEL_LAUNCH_CONFIG", json.dumps({"deepspeed_config": section}))
    plugin = DeepSpeedPlugin(gradient_clipping=0.3)  # code wins over the section
    assert plugin.zero_stage == 3 and plugin.offload_param_device == "cpu"
    assert plugin.gradient_clipping == 0.3 and plugin.config_sources["gradient_clipping"] == "code"
    assert plugin.config_sources["zero_stage"] == "deepspeed_config section"
    assert plugin.transformer_moe_cls_names == ["MixtralSparseMoeBlock", "Qwen2MoeSparseMoeBlock"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(zero_stage=4), "zero_stage=4 is not a ZeRO stage"),
        (dict(zero_stage=0, offload_optimizer_device="cpu"), "needs ZeRO"),
        (dict(offload_optimizer_device="disk"), "offload_optimizer_device='disk'"),
        (dict(offload_optimizer_device="nvme"), "offload_optimizer_nvme_path"),
        (dict(gradient_accumulation_steps=0), "gradient_accumulation_steps"),
        (dict(zero3_save_16bit_model="maybe"), "zero3_save_16bit_model"),
    ],
)
def test_bad_values_name_the_key(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        DeepSpeedPlugin(**kwargs)


@pytest.mark.parametrize("stage", [1, 2])
def test_param_offload_below_stage_3_is_accepted_with_a_warning(stage):
    """Accelerate accepts it and writes ``offload_param``; DeepSpeed ignores it below stage 3."""
    with pytest.warns(
        UserWarning, match=f"offload_param_device=cpu has no effect with zero_stage {stage}"
    ):
        plugin = DeepSpeedPlugin(
            zero_stage=stage,
            offload_optimizer_device="cpu",
            offload_param_device="cpu",
            zero3_init_flag=False,
        )
    zero = plugin.deepspeed_config["zero_optimization"]
    assert zero["stage"] == stage and plugin.zero_stage == stage
    assert zero["offload_param"] == {"device": "cpu"}
    assert zero["offload_optimizer"] == {"device": "cpu"}
    assert plugin.offload_param_device == "cpu"
    # DeepSpeed's own config model reads it without complaint at this stage
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    assert DeepSpeedZeroConfig(**zero).offload_param.device == "cpu"


def test_section_validator():
    errors = validate_section(
        {"zero_stage": 4, "offload_param_device": "gpu", "colour": "red", "zero3_init_flag": "x"}
    )
    assert len(errors) == 4
    assert any("deepspeed_config.zero_stage" in e for e in errors)
    assert any("deepspeed_config.colour is not a DeepSpeed setting" in e for e in errors)
    # accepted below stage 3, as Accelerate does (DeepSpeed ignores it there)
    assert validate_section({"zero_stage": 2, "offload_param_device": "cpu"}) == []
    assert validate_section({"deepspeed_multinode_launcher": "ssh"})[0].startswith(
        "deepspeed_config.deepspeed_multinode_launcher"
    )
    assert validate_section({"zero_stage": 3, "offload_param_device": "cpu"}) == []


def test_config_file_and_plugin_fields(tmp_path):
    plugin = DeepSpeedPlugin(hf_ds_config=SEED_CONFIGS / "zero_stage3_offload_config.json")
    assert plugin.zero_stage == 3 and plugin.offload_param_device == "cpu"
    # a field fills an auto of the file; an equal value is fine; a different one is an error
    plugin = DeepSpeedPlugin(
        hf_ds_config=SEED_CONFIGS / "zero_stage2_config.json", gradient_clipping=0.7, zero_stage=2
    )
    assert plugin.deepspeed_config["gradient_clipping"] == 0.7
    with pytest.raises(ConfigError, match="zero_optimization.stage=2 .* sets 3"):
        DeepSpeedPlugin(hf_ds_config=SEED_CONFIGS / "zero_stage2_config.json", zero_stage=3)
    stage2 = tmp_path / "stage2_param_offload.json"
    stage2.write_text(
        json.dumps({"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}})
    )
    with pytest.warns(UserWarning, match="has no effect with zero_stage 2"):
        plugin = DeepSpeedPlugin(hf_ds_config=str(stage2))
    assert plugin.offload_param_device == "cpu"
    assert plugin.deepspeed_config["zero_optimization"]["offload_param"] == {"device": "cpu"}
    with pytest.raises(ConfigError, match="does not exist"):
        DeepSpeedPlugin(hf_ds_config=str(tmp_path / "missing.json"))
    config = HfDeepSpeedConfig({"a": {"b": "auto"}})
    assert config.is_auto("a.b") and config.get_value("a.c", 5) == 5
    config.del_config_sub_tree("a.b")
    assert config.get_value("a.b") is None


def _context(**kwargs) -> AutoContext:
    base = dict(
        num_processes=2,
        gradient_accumulation_steps=2,
        micro_batch_size=4,
        micro_batch_source="the data loader's batch_size 4",
        precision="no",
    )
    return AutoContext(**{**base, **kwargs})


def test_auto_values_and_their_sources(caplog):
    raw = json.loads((SEED_CONFIGS / "zero_stage3_offload_config.json").read_text())
    raw["gradient_accumulation_steps"] = "auto"
    raw["fp16"]["enabled"] = "auto"
    ctx = _context(
        optimizer_values={"lr": 3e-4, "weight_decay": 0.01},
        optimizer_source="DummyOptim",
        total_num_steps=100,
        warmup_num_steps=10,
        scheduler_source="DummyScheduler",
        hidden_size=32,
        hidden_size_source="model.config.hidden_size",
        zero3_save_16bit_model=True,
    )
    with caplog.at_level(logging.INFO, logger="accel_deepspeed.auto"):
        config, filled = fill_auto(raw, ctx)
    assert raw["train_batch_size"] == "auto"  # the input is not changed
    assert config["train_micro_batch_size_per_gpu"] == 4
    assert config["gradient_accumulation_steps"] == 2
    assert config["train_batch_size"] == 16
    assert config["gradient_clipping"] == 1.0
    assert config["fp16"]["enabled"] is False
    assert config["optimizer"]["params"] == {"lr": 3e-4, "weight_decay": 0.01}
    assert config["scheduler"]["params"] == {
        "warmup_min_lr": 0,
        "warmup_max_lr": 3e-4,
        "warmup_num_steps": 10,
        "total_num_steps": 100,
    }
    zero = config["zero_optimization"]
    assert zero["reduce_bucket_size"] == 32 * 32
    assert zero["stage3_prefetch_bucket_size"] == int(0.9 * 32 * 32)
    assert zero["stage3_param_persistence_threshold"] == 320
    assert zero["stage3_gather_16bit_weights_on_model_save"] is True
    sources = {f.key: f.source for f in filled}
    assert sources["train_batch_size"].endswith("x 2 processes")
    assert "model.config.hidden_size = 32" in sources["zero_optimization.reduce_bucket_size"]
    assert (
        "train_micro_batch_size_per_gpu = 4 (auto: the data loader's batch_size 4)" in caplog.text
    )
    assert "optimizer.params.lr = 0.0003 (auto: DummyOptim)" in caplog.text


def test_explicit_micro_batch_is_honoured(caplog):
    raw = {"train_micro_batch_size_per_gpu": 2, "train_batch_size": "auto"}
    with caplog.at_level(logging.WARNING, logger="accel_deepspeed.auto"):
        config, _ = fill_auto(raw, _context())
    assert config["train_micro_batch_size_per_gpu"] == 2 and config["train_batch_size"] == 8
    assert "train_micro_batch_size_per_gpu is 2" in caplog.text
    # a given train_batch_size decides the micro-batch
    config, filled = fill_auto(
        {"train_batch_size": 32, "train_micro_batch_size_per_gpu": "auto"}, _context()
    )
    assert config["train_micro_batch_size_per_gpu"] == 8
    assert "train_batch_size 32" in filled[0].source or "train_batch_size 32" in filled[-1].source


def test_unresolvable_auto_is_an_error_naming_the_key():
    raw = json.loads((SEED_CONFIGS / "zero_stage3_offload_config.json").read_text())
    with pytest.raises(ConfigError) as info:
        fill_auto(raw, _context(micro_batch_size=None, optimizer_values={"lr": 1e-3}))
    message = str(info.value)
    for key in (
        "train_micro_batch_size_per_gpu: pass a data loader",
        "scheduler.params.total_num_steps: pass DummyScheduler",
        "zero_optimization.reduce_bucket_size: the model has no config.hidden_size",
    ):
        assert key in message, message
    with pytest.raises(ConfigError, match="enables fp16 but mixed_precision is 'bf16'"):
        fill_auto({"fp16": {"enabled": True}}, _context(precision="bf16"))


def test_zero3_init_config_has_no_auto_and_a_dtype():
    plugin = DeepSpeedPlugin(zero_stage=3, offload_param_device="cpu", zero3_init_flag=True)
    config = plugin._zero_init_config()
    assert config["zero_optimization"]["offload_param"] == {"device": "cpu"}
    assert config["fp16"] == {"enabled": False} and config["bf16"] == {"enabled": False}
    assert "auto" not in json.dumps(config)


def test_editing_deepspeed_config_is_seen_by_get_value():
    plugin = DeepSpeedPlugin(zero_stage=1)
    plugin.deepspeed_config["train_micro_batch_size_per_gpu"] = 4  # Accelerate's documented edit
    assert plugin.get_value("train_micro_batch_size_per_gpu") == 4 and not plugin.is_auto(
        "train_micro_batch_size_per_gpu"
    )


def test_one_fp16_bf16_rule_everywhere_and_fp8_computes_in_bf16():
    """The ``fp16`` / ``bf16`` sections follow the precision's ``dtype`` in the plugin's
    ``set_mixed_precision``, in the ``auto`` filling and in ZeRO-3 init alike; fp8 enables bf16
    (its non-FP8 layers compute in bf16, as Accelerate does with TransformerEngine)."""
    from accel.plugins import registry
    from accel_deepspeed.config import half_precision_sections

    expected = {
        "no": {"fp16": False, "bf16": False},
        "fp16": {"fp16": True, "bf16": False},
        "bf16": {"fp16": False, "bf16": True},
        "fp8": {"fp16": False, "bf16": True},
    }
    for name, wanted in expected.items():
        assert half_precision_sections(name) == wanted, name
        plugin = DeepSpeedPlugin(zero_stage=3, zero3_init_flag=True)
        plugin.set_mixed_precision(name)
        assert {s: plugin.deepspeed_config[s]["enabled"] for s in wanted} == wanted, name
        config, _ = fill_auto(
            {"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}}, _context(precision=name)
        )
        assert {s: config[s]["enabled"] for s in wanted} == wanted, name

        class Run:  # what the plugin reads of the run it is attached to: the precision
            precision = registry.precisions()[name]  # the class: its fields, no FP8 library

        plugin.attach(Run())
        assert {s: plugin._zero_init_config()[s]["enabled"] for s in wanted} == wanted, name
    with pytest.raises(ConfigError, match="enables fp16 but mixed_precision is 'fp8'"):
        fill_auto({"fp16": {"enabled": True}}, _context(precision="fp8"))
    fill_auto({"bf16": {"enabled": True}}, _context(precision="fp8"))  # agrees: accepted
