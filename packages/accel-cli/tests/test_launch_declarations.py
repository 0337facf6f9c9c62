"""`accel launch`'s parser is generated from the declarations: every flag, its spellings,
dest, metavar (with the choices) and help come from one Option, core's and plugins' alike."""

from __future__ import annotations

import argparse

from accel.config.core_options import CORE_SECTION
from accel.config.registered import registered_sections
from accel.plugins import list_plugins
from accel_cli.launch import CORE_SECTIONS, LAUNCH_SECTION, SCRIPT_SECTION, build_parser
from accel_cli.parsing import add_hyphenated_spellings, hyphenated


def _flag_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.dest != "help"]


def test_every_flag_of_accel_launch_comes_from_a_declaration():
    parser = build_parser().parser
    actions = _flag_actions(parser)
    assert len(actions) > 100  # core's and every installed plugin's
    for action in actions:
        declared = getattr(action, "accel_declaration", None)
        assert declared is not None, f"{action.option_strings} is not generated from an Option"
        section, option = declared
        assert action.dest == section.dest_of(option)
        if isinstance(action, argparse._StoreFalseAction):
            assert action.option_strings == ["--" + option.off_flag]
            continue
        assert action.option_strings == section.flags_of(option)
        assert action.help == section.help_of(option)
        if option.store_true:
            assert isinstance(action, argparse._StoreTrueAction)
            continue
        assert action.metavar == option.shown_metavar
        if option.choices and not option.metavar:
            assert (
                action.metavar == "{" + ",".join(map(str, (*option.choices, *option.extra))) + "}"
            )


def test_every_declared_option_with_a_flag_is_in_the_parser():
    parser = build_parser().parser
    by_dest: dict[str, list[str]] = {}
    declared = set()
    for action in _flag_actions(parser):
        if not isinstance(action, argparse._StoreFalseAction):
            by_dest[action.dest] = action.option_strings
            declared.add(id(action.accel_declaration[1]))
    loaded = {info.distribution for info in list_plugins() if not info.error}
    sections = [*CORE_SECTIONS, LAUNCH_SECTION, SCRIPT_SECTION, *registered_sections().values()]
    checked = 0
    for section in sections:
        for option in section:
            flags = section.flags_of(option)
            if not flags or (option.plugin and option.plugin not in loaded):
                assert id(option) not in declared, (section.key, option.name)
                continue
            assert by_dest.get(section.dest_of(option)) == flags, (section.key, option.name)
            checked += 1
    assert checked > 100
    # core's flags: one per declared key with a flag, and the keys without stay flagless
    assert by_dest["use_cpu"] == ["--cpu"]
    assert by_dest["num_machines"] == ["--num_machines", "--nnodes"]
    assert by_dest["dynamo_mode"] == ["--dynamo_mode"]
    assert "distributed_type" not in by_dest and CORE_SECTION.flags_of("distributed_type") == []


def test_every_flag_also_parses_with_hyphens():
    parser = build_parser().parser
    add_hyphenated_spellings(parser)
    table = parser._option_string_actions
    for action in _flag_actions(parser):
        for option in action.option_strings:
            assert table[hyphenated(option)] is action, option


def test_dynamo_flags_keep_accelerates_dests_and_reach_dynamo_config(tmp_path, monkeypatch):
    from accel_cli.launch import parse, resolve_from

    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path))
    ns, lp = parse(["--dynamo-backend", "eager", "--dynamo_use_dynamic", "train.py"])
    assert (ns.dynamo_backend, ns.dynamo_use_dynamic) == ("eager", True)
    resolved = resolve_from(ns, lp)
    assert resolved.values["dynamo_config"]["dynamo_backend"] == "EAGER"
    assert str(resolved.source("dynamo_config.dynamo_backend")) == "flag --dynamo_backend"
