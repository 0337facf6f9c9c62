"""Drop-in details of Accelerate's CLI: hyphenated launch flags, ``config update`` of FSDP1
keys and ``accel to-fsdp2``. In-process (the parsers and ``main`` functions), so they stay fast."""

from __future__ import annotations

import os

import pytest
import yaml
from accel_cli import main as cli


@pytest.fixture(autouse=True)
def private_config(tmp_path, monkeypatch):
    """No user config file and no ACCEL_* settings reach the parsers."""
    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path / "accel-config"))
    for key in [k for k in os.environ if k.startswith(("ACCEL_", "ACCELERATE_"))]:
        if key != "ACCEL_CONFIG_DIR":
            monkeypatch.delenv(key)


# --------------------------------------------------------------------------- hyphenated flags


def test_launch_accepts_hyphenated_core_and_plugin_flags():
    from accel_cli.launch import flags_from, parse

    hyphens, lp = parse(
        [
            "--num-processes=4",
            "--multi-gpu",
            "--mixed-precision",
            "bf16",
            "--main-process-port",
            "29600",
            "--gradient-accumulation-steps",
            "2",
            "--use-fsdp",
            "--fsdp-sharding-strategy",
            "SHARD_GRAD_OP",
            "--fsdp-backward-prefetch-policy",
            "BACKWARD_PRE",
            "--no-python",
            "train",
        ]
    )
    underscores, lp2 = parse(
        [
            "--num_processes=4",
            "--multi_gpu",
            "--mixed_precision",
            "bf16",
            "--main_process_port",
            "29600",
            "--gradient_accumulation_steps",
            "2",
            "--use_fsdp",
            "--fsdp_sharding_strategy",
            "SHARD_GRAD_OP",
            "--fsdp_backward_prefetch_policy",
            "BACKWARD_PRE",
            "--no_python",
            "train",
        ]
    )
    assert vars(hyphens) == vars(underscores)
    flags = flags_from(hyphens, lp)
    assert flags == flags_from(underscores, lp2)
    assert flags["distributed_type"] == "FSDP"
    assert flags["fsdp_config.fsdp_sharding_strategy"] == "SHARD_GRAD_OP"
    assert flags["num_processes"] == "4"


def test_launch_help_states_both_spellings_without_doubling_lines(capsys):
    from accel_cli.launch import build_parser

    text = build_parser().parser.format_help()
    assert "--num_processes" in text
    assert "--num-processes" in text  # said once, in the description
    assert text.count("--num-processes") == 1
    assert "--fsdp-sharding-strategy" not in text


def test_hyphenated_flag_of_an_absent_plugin_names_the_package(monkeypatch):
    from accel.errors import MissingPluginError
    from accel_cli import launch

    monkeypatch.setattr(launch, "_add_plugin_arguments", lambda result: None)
    with pytest.raises(MissingPluginError, match="accel-deepspeed"):
        launch.parse(["--zero-stage", "2", "train.py"])


# --------------------------------------------------------------------------- config update


FSDP1 = {
    "compute_environment": "LOCAL_MACHINE",
    "distributed_type": "FSDP",
    "mixed_precision": "bf16",
    "num_processes": 2,
    "fsdp_config": {
        "fsdp_version": 1,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_backward_prefetch_policy": "BACKWARD_PRE",
        "fsdp_forward_prefetch": False,
        "fsdp_offload_params": False,
        "fsdp_sharding_strategy": "FULL_SHARD",
        "fsdp_state_dict_type": "SHARDED_STATE_DICT",
        "fsdp_sync_module_states": True,
        "fsdp_transformer_layer_cls_to_wrap": "BertLayer",
        "fsdp_use_orig_params": True,
        "fsdp_cpu_ram_efficient_loading": True,
    },
}


def _write(path, data):
    path.write_text(yaml.safe_dump(data))
    return path


def test_config_update_renames_fsdp1_keys(tmp_path, capsys):
    path = _write(tmp_path / "fsdp1.yaml", FSDP1)
    assert cli.run(["config", "update", "--config-file", str(path)]) == 0
    fsdp = yaml.safe_load(path.read_text())["fsdp_config"]
    assert "fsdp_backward_prefetch_policy" not in fsdp
    assert fsdp["fsdp_backward_prefetch"] == "BACKWARD_PRE"
    assert fsdp["fsdp_sharding_strategy"] == "FULL_SHARD"


def test_config_update_gives_numbered_choices_their_names(tmp_path):
    data = {
        **FSDP1,
        "fsdp_config": {"fsdp_sharding_strategy": 2, "fsdp_auto_wrap_policy": "no_wrap"},
    }
    path = _write(tmp_path / "numbers.yaml", data)
    assert cli.run(["config", "update", "--config_file", str(path)]) == 0
    fsdp = yaml.safe_load(path.read_text())["fsdp_config"]
    assert fsdp["fsdp_sharding_strategy"] == "SHARD_GRAD_OP"
    assert fsdp["fsdp_auto_wrap_policy"] == "NO_WRAP"


# --------------------------------------------------------------------------- to-fsdp2


def test_to_fsdp2_converts_keys_and_values_like_accelerate(tmp_path, capsys):
    source = _write(tmp_path / "fsdp1.yaml", FSDP1)
    out = tmp_path / "fsdp2.yaml"
    assert cli.run(["to-fsdp2", "--config_file", str(source), "--output_file", str(out)]) == 0
    converted = yaml.safe_load(out.read_text())
    assert converted["fsdp_config"] == {
        "fsdp_version": 2,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_offload_params": False,
        "fsdp_reshard_after_forward": True,
        "fsdp_state_dict_type": "SHARDED_STATE_DICT",
        "fsdp_transformer_layer_cls_to_wrap": "BertLayer",
        "fsdp_cpu_ram_efficient_loading": True,
    }
    assert converted["mixed_precision"] == "bf16"
    assert yaml.safe_load(source.read_text()) == FSDP1  # the input is left alone
    err = capsys.readouterr().err
    for dropped in (
        "fsdp_backward_prefetch_policy",
        "fsdp_forward_prefetch",
        "fsdp_sync_module_states",
        "fsdp_use_orig_params",
    ):
        assert dropped in err


@pytest.mark.parametrize(
    ("strategy", "reshard"),
    [("SHARD_GRAD_OP", False), ("HYBRID_SHARD", True), ("HYBRID_SHARD_ZERO2", False), (3, False)],
)
def test_to_fsdp2_maps_sharding_strategy_to_reshard_after_forward(tmp_path, strategy, reshard):
    source = _write(
        tmp_path / "c.yaml", {**FSDP1, "fsdp_config": {"fsdp_sharding_strategy": strategy}}
    )
    assert cli.run(["to-fsdp2", "--config-file", str(source), "--overwrite"]) == 0
    assert yaml.safe_load(source.read_text())["fsdp_config"] == {
        "fsdp_version": 2,
        "fsdp_reshard_after_forward": reshard,
    }


def test_to_fsdp2_leaves_fsdp2_and_non_fsdp_configs_as_they_are(tmp_path, capsys):
    fsdp2 = {**FSDP1, "fsdp_config": {"fsdp_version": 2, "fsdp_reshard_after_forward": False}}
    source = _write(tmp_path / "v2.yaml", fsdp2)
    assert cli.run(["to-fsdp2", "--config_file", str(source), "--overwrite"]) == 0
    assert yaml.safe_load(source.read_text()) == fsdp2
    assert "already" in capsys.readouterr().err


def test_to_fsdp2_bad_input_is_one_line_exit_2(tmp_path, capsys):
    source = _write(tmp_path / "c.yaml", FSDP1)
    existing = _write(tmp_path / "out.yaml", {"x": 1})
    cases = [
        (["--config_file", str(tmp_path / "missing.yaml"), "--overwrite"], "does not exist"),
        (["--config_file", str(source), "--output_file", str(existing)], "--overwrite"),
        (["--config_file", str(source)], "--output_file"),
        (["--output_file", str(tmp_path / "o.yaml")], "--config_file"),
    ]
    for argv, says in cases:
        with pytest.raises(SystemExit) as exc:
            cli.run(["to-fsdp2", *argv])
        assert exc.value.code == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith("accel to-fsdp2: error:") and says in err, err
    assert yaml.safe_load(existing.read_text()) == {"x": 1}


def test_to_fsdp2_is_listed_in_the_top_level_help(capsys):
    assert cli.run(["--help"]) == 0
    assert "to-fsdp2" in capsys.readouterr().out


def test_prepare_multi_gpu_env_takes_accel_launchs_parsed_arguments():
    from accel.utils import prepare_multi_gpu_env
    from accel_cli.launch import parse

    argv = ["--num-processes", "2", "--multi-gpu", "--mixed-precision", "fp16", "train.py"]
    ns, _ = parse(argv)
    env = prepare_multi_gpu_env(ns)
    assert env["ACCELERATE_MIXED_PRECISION"] == "fp16"
    assert env["ACCEL_DISTRIBUTED_TYPE"] == "MULTI_GPU"
    assert ns.nproc_per_node == "2"
