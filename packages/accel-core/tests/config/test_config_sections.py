"""Declarative config sections (``accel.config.options``) and the shared process set-up."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

import pytest
from accel.config.files import check_sections, standard_config
from accel.config.options import Option, Section
from accel.config.registered import section_table
from accel.errors import ConfigError


def _section() -> Section:
    return Section(
        "demo_config",
        [
            Option("demo_mode", choices=("FAST", "SAFE"), default="SAFE", numbered=True),
            Option("demo_workers", int, 1, minimum=1, help="worker threads"),
            Option("demo_ratio", float, 0.5, minimum=0),
            Option("demo_check", bool, False, aliases=("demo_verify",)),
            Option("demo_names", list, help="class names"),
            Option("demo_steps", int, minimum=1, extra=("auto",), flag=None),
            Option("demo_quiet", bool, store_true=True),
        ],
        title="Demo",
        checks=[_ratio_needs_workers],
    )


def _ratio_needs_workers(values: dict) -> None:
    if values["demo_ratio"] > 1 and values["demo_workers"] < 2:
        raise ConfigError("demo_ratio above 1 needs demo_workers >= 2")


def test_validation_names_key_value_and_what_is_allowed():
    s = _section()
    assert s.validate({"demo_mode": "fast", "demo_workers": "3", "demo_verify": "yes"}) == []
    errors = s.validate(
        {"demo_mode": "FASTER", "demo_workers": 0, "demo_ratio": "x", "demo_wrokers": 2}
    )
    assert errors == [
        "demo_config.demo_mode='FASTER' is not allowed (did you mean FAST?): "
        "use FAST or SAFE (or 1-2)",
        "demo_config.demo_workers=0 must be a whole number >= 1",
        "demo_config.demo_ratio='x' is not a number: use a number >= 0",
        "unknown key 'demo_wrokers': demo_config.demo_wrokers is not a Demo setting; "
        "did you mean demo_workers? allowed keys are demo_mode, demo_workers, demo_ratio, "
        "demo_check, demo_names, demo_steps, demo_quiet",
    ]
    assert s({"demo_check": "maybe"}) == [
        "demo_config.demo_check='maybe' is not a boolean: use true or false"
    ]
    assert s.validate(["demo_mode"]) == ["demo_config must be a mapping of Demo settings, not list"]
    # cross-key checks run once every key is valid, over the defaulted values
    assert s.validate({"demo_ratio": 2}) == [
        "demo_config: demo_ratio above 1 needs demo_workers >= 2"
    ]
    assert s.validate({"demo_ratio": 2, "demo_workers": 2}) == []


def test_read_gives_typed_defaulted_values_of_the_launched_section(monkeypatch):
    s = _section()
    monkeypatch.delenv("ACCEL_LAUNCH_CONFIG", raising=False)
    assert (
        s.read()
        == s.defaults()
        == {
            "demo_mode": "SAFE",
            "demo_workers": 1,
            "demo_ratio": 0.5,
            "demo_check": False,
            "demo_names": None,
            "demo_steps": None,
            "demo_quiet": None,
        }
    )
    launched = {"demo_config": {"demo_mode": 1, "demo_workers": "4", "demo_verify": "on",
                                "demo_names": "A, B", "demo_steps": "AUTO", "demo_ratio": None}}  # fmt: skip
    monkeypatch.setenv("ACCEL_LAUNCH_CONFIG", json.dumps(launched))
    assert s.read(defaults=False) == {
        "demo_mode": "FAST",
        "demo_workers": 4,
        "demo_check": True,
        "demo_names": ["A", "B"],
        "demo_steps": "auto",
    }
    assert s.read()["demo_ratio"] == 0.5  # null means "not set"
    with pytest.raises(ConfigError, match=r"demo_config.demo_workers='many' is not an integer"):
        s.read({"demo_workers": "many"})


def test_flags_are_checked_when_parsed_and_keep_the_text():
    s = _section()
    parser = argparse.ArgumentParser(prog="demo", exit_on_error=False)
    s.add_arguments(parser)
    options = {o for a in parser._actions for o in a.option_strings}
    assert {"--demo_mode", "--demo_workers", "--demo_check", "--demo_quiet"} <= options
    assert "--demo_steps" not in options  # flag=None
    ns = parser.parse_args(["--demo_workers", "2", "--demo_quiet"])
    given = {k: v for k, v in vars(ns).items() if v is not None}
    assert given == {"demo_config.demo_workers": "2", "demo_config.demo_quiet": True}
    with pytest.raises(argparse.ArgumentError, match=r"'0' must be a whole number >= 1"):
        parser.parse_args(["--demo_workers", "0"])


def test_sections_reach_config_files_through_the_hook(tmp_path):
    # accel-fsdp registers a declared Section: a bad file value names the file and the key
    pytest.importorskip("accel_fsdp")
    from accel.config.registered import section_validators

    validators = section_validators()
    assert isinstance(validators["fsdp_config"], Section)
    with pytest.raises(ConfigError) as error:
        check_sections({"fsdp_config": {"fsdp_sharding_strategy": "HALF"}}, "c.yaml")
    assert str(error.value).startswith(
        "c.yaml: fsdp_config: fsdp_config.fsdp_sharding_strategy='HALF' is not allowed"
    )
    s = _section()
    assert section_table([s]) == {"demo_config": s} == section_table({"demo_config": s})
    assert section_table(None) == {}


def test_standard_config_is_the_one_default():
    config = standard_config()
    assert config["distributed_type"] == "NO" and config["num_processes"] == 1
    config["tpu_env"].append("X")
    assert standard_config()["tpu_env"] == []  # a fresh copy each time


def test_ensure_process_group_and_plugin_object_in_a_fresh_process():
    code = textwrap.dedent(
        """
        import torch.distributed as dist
        from accel.distributed.process import ensure_process_group, plugin_object
        from accel.state import AcceleratorState

        assert ensure_process_group() is True
        assert dist.get_world_size() == 1 and dist.get_rank() == 0
        assert ensure_process_group() is False
        state = AcceleratorState(cpu=True)
        made = plugin_object(state, "fsdp_plugin", dict)
        assert state.fsdp_plugin is made and plugin_object(state, "fsdp_plugin", list) is made
        dist.destroy_process_group()
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
