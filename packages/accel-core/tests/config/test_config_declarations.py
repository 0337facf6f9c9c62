"""Core's keys and strategies are declared with Option / Section, like the plugins' sections."""

from __future__ import annotations

import argparse

import pytest
from accel.config.core_options import CORE_SECTION, DYNAMO_SECTION, KEYS
from accel.config.files import STANDARD_KEYS, validate
from accel.config.options import Option, Section
from accel.config.strategy import Strategy
from accel.errors import ConfigError


def test_core_keys_are_options_and_standard_keys_come_from_them():
    assert all(isinstance(option, Option) for option in CORE_SECTION)
    assert KEYS["distributed_type"].kind == "choice" and KEYS["gpu_ids"].kind == "gpu_ids"
    assert "num_processes" in STANDARD_KEYS and "gpu_ids" not in STANDARD_KEYS
    assert list(STANDARD_KEYS) == sorted(o.name for o in CORE_SECTION if o.standard)


def test_dynamo_config_is_checked_by_its_section():
    data = validate({"dynamo_config": {"dynamo_backend": False, "dynamo_use_dynamic": "yes"}})
    assert data["dynamo_config"] == {"dynamo_backend": "NO", "dynamo_use_dynamic": True}
    with pytest.raises(ConfigError, match="c.yaml: dynamo_config: .*did you mean dynamo_mode"):
        validate({"dynamo_config": {"dynamo_mod": "default"}}, "c.yaml")
    assert DYNAMO_SECTION.validate({"dynamo_mode": "fast"})


class _Ask:
    def __init__(self, answer):
        self.answer, self.asked = answer, []

    def confirm(self, question, default=False, key=None):
        self.asked.append(key)
        return self.answer


def _strategy():
    section = Section("demo_config", [Option("demo_size", int, 1)], distributed_type="DEMO")
    return Strategy(section, "use_demo", help="train with demo", question="Use demo?")


def test_strategy_flag_section_flags_and_question():
    strategy = _strategy()
    parser = argparse.ArgumentParser()
    strategy.add_arguments(parser)
    args = vars(parser.parse_args(["--use_demo", "--demo_size", "3"]))
    assert args["use_demo"] is True and args["demo_config.demo_size"] == "3"

    config = {"distributed_type": "MULTI_GPU"}
    assert strategy.chosen(_Ask(True), config) and config["distributed_type"] == "DEMO"
    config = {"distributed_type": "NO"}
    assert not strategy.chosen(_Ask(False), config) and config["distributed_type"] == "NO"
    ask = _Ask(True)
    assert not strategy.chosen(ask, {"distributed_type": "FSDP"}) and ask.asked == []


@pytest.mark.parametrize(
    ("name", "bad", "problem"),
    [
        ("num_processes", "0", "'0' must be a whole number >= 1"),
        ("num_processes", "many", "'many' is not an integer: use a whole number >= 1"),
        (
            "main_process_port",
            "70000",
            "'70000' is out of range: use a port number from 1 to 65535",
        ),
        ("rdzv_backend", "zk", "'zk' is not allowed: use static, c10d, etcd or etcd-v2"),
        ("use_cpu", "maybe", "'maybe' is not a boolean: use true or false"),
        ("gpu_ids", "0,0", "'0,0' names a GPU twice: use all or comma-separated GPU ids"),
        ("main_process_ip", "a b", "'a b' is not a host name or IP address"),
    ],
)
def test_a_bad_value_reads_the_same_from_a_file_the_environment_and_a_flag(
    tmp_path, name, bad, problem
):
    """One converter (Option.convert): only the label (where the value came from) differs."""
    from accel.config.resolution import resolve

    path = tmp_path / "c.yaml"
    path.write_text(f"{name}: '{bad}'\n")
    env = KEYS[name].env
    messages = {}
    with pytest.raises(ConfigError) as err:
        resolve(config_file=path, environ={})
    messages["file"] = str(err.value)
    with pytest.raises(ConfigError) as err:
        resolve(flags={name: bad}, environ={})
    messages["flag"] = str(err.value)
    if env:
        with pytest.raises(ConfigError) as err:
            resolve(environ={env: bad})
        messages["env"] = str(err.value)
    assert messages["file"].startswith(f"{path}: {name}=")
    assert messages["flag"].startswith(f"--{name}=")
    for message in messages.values():
        assert problem in message, messages
        assert message.partition("=")[2] == messages["flag"].partition("=")[2]


def test_yaml_types_and_strings_convert_alike():
    """Bools, lists and choices follow one rule whether YAML typed them or a flag wrote them."""
    assert KEYS["use_cpu"].convert("yes") is KEYS["use_cpu"].convert(True) is True
    assert KEYS["downcast_bf16"].convert(False) == KEYS["downcast_bf16"].convert("off") == "no"
    assert KEYS["tpu_env"].convert("A=1, B=2") == KEYS["tpu_env"].convert(["A=1", "B=2"])
    assert KEYS["mixed_precision"].convert(False) == "no"  # YAML's bare `no`
    assert KEYS["distributed_type"].convert("tpu") == "XLA"
    with pytest.raises(ConfigError, match="num_machines must not be empty"):
        KEYS["num_machines"].convert(None)
