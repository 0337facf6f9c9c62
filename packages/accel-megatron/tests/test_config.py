"""MegatronLMPlugin settings, validation and the helpers that need no process group."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from accel.errors import ConfigError
from accel_megatron.config import MegatronLMPlugin, validate_section
from accel_megatron.engine import gpt_inputs, split_micro_batches
from accel_megatron.scheduler import MegatronLMDummyScheduler


def test_defaults_and_launched_section(monkeypatch):
    plugin = MegatronLMPlugin()
    assert (plugin.tp_degree, plugin.pp_degree, plugin.num_micro_batches) == (1, 1, 1)
    assert plugin.gradient_clipping == 1.0 and not plugin.sequence_parallelism
    section = {"megatron_lm_tp_degree": "2", "megatron_lm_recompute_activations": "true"}
    monkeypatch.setenv("ACCEL_LAUNCH_CONFIG", json.dumps({"megatron_lm_config": section}))
    plugin = MegatronLMPlugin(
        num_micro_batches=4
    )  # code wins over the file, the file over defaults
    assert (plugin.tp_degree, plugin.num_micro_batches, plugin.recompute_activations) == (
        2,
        4,
        True,
    )


def test_groups_and_global_batch_size():
    plugin = MegatronLMPlugin(tp_degree=2, pp_degree=2, num_micro_batches=4)
    assert plugin.model_parallel_size == 4 and plugin.dp_degree(8) == 2
    assert plugin.set_batch_sizes(3, world_size=8) == 3 * 4 * 2 == plugin.global_batch_size
    with pytest.raises(
        ConfigError,
        match=r"megatron_lm_tp_degree=2 x megatron_lm_pp_degree=2 = 4 does not divide the 6",
    ):
        plugin.dp_degree(6)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tp_degree": 0}, "tp_degree=0 must be a whole number >= 1"),
        ({"pp_degree": "two"}, "pp_degree='two' is not an integer"),
        ({"sequence_parallelism": True}, "sequence_parallelism=true needs tp_degree > 1"),
        ({"pp_degree": 2}, "pp_degree=2 needs num_micro_batches > 1"),
        (
            {"use_distributed_optimizer": "perhaps"},
            "use_distributed_optimizer='perhaps' is not a boolean",
        ),
        ({"gradient_clipping": -1}, "gradient_clipping=-1 must be >= 0"),
        ({"lr_decay_style": "zigzag"}, "lr_decay_style='zigzag' is not allowed"),
    ],
)
def test_invalid_settings_are_named(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        MegatronLMPlugin(**kwargs)


def test_section_validator():
    assert validate_section({"megatron_lm_tp_degree": 2, "megatron_lm_num_micro_batches": 2}) == []
    errors = validate_section({"megatron_lm_tp_degree": "x", "megatron_lm_colour": "red"})
    assert len(errors) == 2 and any("megatron_lm_colour" in e for e in errors)
    assert validate_section({"megatron_lm_pp_degree": 4}) == [
        "megatron_lm_config: pp_degree=4 needs num_micro_batches > 1 (with one micro-batch the pipeline "
        "stages run one after another): set megatron_lm_num_micro_batches, ideally >= 4"
    ]


def test_micro_batches_and_gpt_inputs():
    batch = {
        "input_ids": torch.arange(24).view(4, 6),
        "attention_mask": torch.ones(4, 6),
        "tag": "x",
    }
    parts = split_micro_batches(batch, 2)
    assert [p["input_ids"].shape for p in parts] == [(2, 6), (2, 6)] and parts[1]["tag"] == "x"
    assert torch.equal(parts[1]["input_ids"], batch["input_ids"][2:])
    with pytest.raises(ValueError, match="megatron_lm_num_micro_batches=3"):
        split_micro_batches(batch, 3)
    inputs = gpt_inputs(
        {"input_ids": torch.tensor([[5, 6, 7]]), "attention_mask": torch.tensor([[1, 1, 0]])}
    )
    assert inputs["labels"].tolist() == [[6, 7, 5]]
    assert inputs["loss_mask"].tolist() == [[1.0, 0.0, 0.0]]  # padding and the last position
    assert inputs["attention_mask"][0, 0].tolist() == [
        [False, True, True],
        [False, False, True],
        [False, False, False],
    ]
    labelled = gpt_inputs(
        {"input_ids": torch.tensor([[1, 2]]), "labels": torch.tensor([[2, -100]])}
    )
    assert labelled["labels"].tolist() == [[2, 0]] and labelled["loss_mask"].tolist() == [
        [1.0, 0.0]
    ]


def test_dummy_scheduler_accepts_both_spellings():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    seed_style = MegatronLMDummyScheduler(
        optimizer=optimizer, num_warmup_steps=2, num_training_steps=10
    )
    assert (seed_style.total_num_steps, seed_style.warmup_num_steps) == (10, 2)
    assert MegatronLMDummyScheduler(optimizer, total_num_steps=5).warmup_num_steps == 0
    with pytest.raises(ValueError, match="total_num_steps"):
        MegatronLMDummyScheduler(optimizer)
    with pytest.raises(RuntimeError, match="placeholder"):
        seed_style.step()


def test_names_exported_and_import_stays_light():
    from accel import MegatronLMPlugin as from_accel
    from accel.utils import MegatronLMDummyScheduler as from_utils

    assert from_accel is MegatronLMPlugin and from_utils is MegatronLMDummyScheduler
    from accel.utils import MegatronLMDummyDataLoader
    from accel_megatron.data import MegatronLMDummyDataLoader as own

    assert MegatronLMDummyDataLoader is own
    code = "import sys, accel_megatron, accel_megatron.plugin; print('megatron' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_optimizer_translation_and_cpu_limits():
    from accel_megatron.optimizer import optimizer_config

    params = [torch.nn.Parameter(torch.zeros(2))]
    plugin = MegatronLMPlugin(gradient_clipping=0.3)
    adamw = torch.optim.AdamW(params, lr=0.02, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1)
    config = optimizer_config(adamw, plugin, "no", on_cpu=False)
    assert (config.optimizer, config.lr, config.weight_decay, config.clip_grad) == (
        "adam",
        0.02,
        0.1,
        0.3,
    )
    assert (config.adam_beta1, config.adam_beta2, config.adam_eps) == (0.8, 0.9, 1e-6)
    sgd = optimizer_config(
        torch.optim.SGD(params, lr=0.1, momentum=0.5), plugin, "bf16", on_cpu=False
    )
    assert sgd.optimizer == "sgd" and sgd.sgd_momentum == 0.5 and sgd.bf16
    assert (
        optimizer_config(adamw, plugin, "no", on_cpu=True).clip_grad == 0.0
    )  # clipped by accel on CPU
    with pytest.raises(ConfigError, match="needs CUDA: megatron-core's DistributedOptimizer"):
        optimizer_config(adamw, MegatronLMPlugin(use_distributed_optimizer=True), "no", on_cpu=True)
    with pytest.raises(ConfigError, match="mixed_precision=bf16 under MEGATRON_LM needs CUDA"):
        optimizer_config(adamw, plugin, "bf16", on_cpu=True)
    with pytest.raises(ConfigError, match="got RMSprop"):
        optimizer_config(torch.optim.RMSprop(params), plugin, "no", on_cpu=False)


def test_config_questions_write_the_section():
    ScriptedAsk = pytest.importorskip("accel_cli.questions").ScriptedAsk
    from accel_megatron.plugin import accel_config_questions

    key = "megatron_lm_config.megatron_lm_"
    ask = ScriptedAsk(
        {
            "use_megatron_lm": True,
            key + "tp_degree": 2,
            key + "pp_degree": 2,
            key + "num_micro_batches": 4,
            key + "use_distributed_optimizer": False,
            key + "gradient_clipping": 0.5,
        }
    )
    config = {"distributed_type": "MULTI_GPU"}
    accel_config_questions(ask=ask, config=config)
    assert ask.unused() == []
    assert config["distributed_type"] == "MEGATRON_LM"
    section = config["megatron_lm_config"]
    assert section == {
        "megatron_lm_tp_degree": 2,
        "megatron_lm_sequence_parallelism": True,
        "megatron_lm_pp_degree": 2,
        "megatron_lm_num_micro_batches": 4,
        "megatron_lm_recompute_activations": True,
        "megatron_lm_use_distributed_optimizer": False,
        "megatron_lm_gradient_clipping": 0.5,
    }
    assert validate_section(section) == []
    other = {"distributed_type": "FSDP"}
    accel_config_questions(ask=ScriptedAsk({"use_megatron_lm": True}), config=other)
    assert other == {"distributed_type": "FSDP"}  # another strategy was chosen: not asked


def test_dummy_data_loader_arguments():
    from accel_megatron.data import MegatronLMDummyDataLoader

    loader = MegatronLMDummyDataLoader(
        data_path=["0.3", "a", "0.7", "b"], seq_length=16, micro_batch_size=2, eod_token_id=0
    )
    assert loader._blend() == (["a", "b"], [0.3, 0.7])
    assert MegatronLMDummyDataLoader("c", 16, 2, 0)._blend() == (["c"], None)
    with pytest.raises(ValueError, match="num_samples"):
        MegatronLMDummyDataLoader("c", 16, 2, 0, num_samples=(1, 2))
    with pytest.raises(ValueError, match="micro_batch_size and seq_length"):
        MegatronLMDummyDataLoader("c", 16, 0, 0)


def test_cpu_execution_redirects_cuda_placements_and_restores():
    from accel_megatron.cpu import cpu_execution

    original = torch.cuda.current_device
    with cpu_execution():
        with cpu_execution():  # re-entrant
            assert torch.cuda.current_device() == 0
        assert torch.zeros(2, device="cuda").device.type == "cpu"
        assert torch.empty(3, device=torch.cuda.current_device()).device.type == "cpu"
        assert torch.ones(1, device="cpu").device.type == "cpu"
    assert torch.cuda.current_device is original
    with cpu_execution(enabled=False):
        assert torch.cuda.current_device is original
