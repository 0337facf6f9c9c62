"""Core's keys and strategies are declared with Option / Section, like the plugins' sections."""

from __future__ import annotations

import argparse

import pytest
from accel.config.keys import CORE_SECTION, DYNAMO_SECTION, KEYS
from accel.config.sections import Option, Section
from accel.config.settings import STANDARD_KEYS, validate
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
