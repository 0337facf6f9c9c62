"""``accel config``: the questionnaire, and ``config default`` / ``update`` / ``show``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path

from .config_paths import config_to_read, config_to_write
from .parsing import Parser, UsageError


def main(argv: list[str], prog: str = "accel config") -> int:
    """Dispatch ``accel config [default|update|show]``."""
    if argv and argv[0] in ("default", "update", "show"):
        return {"default": _default, "update": _update, "show": _show}[argv[0]](
            argv[1:], f"{prog} {argv[0]}"
        )
    return _questionnaire(argv, prog)


def _questionnaire(argv: list[str], prog: str) -> int:
    from accel.config.files import check_sections, default_config_file, standard_config, validate

    from .questions import AnswerError, PromptAsk, ScriptedAsk, ask_questions

    parser = Parser(
        prog=prog,
        description="Answer a few questions and write the config file `accel launch` uses.\n\n"
        "subcommands:\n"
        "  accel config default   write a basic config for this machine without questions\n"
        "  accel config update    bring an existing config file to the current format\n"
        "  accel config show      print every resolved setting and where it came from",
    )
    parser.add_argument(
        "--config_file",
        "--config-file",
        metavar="PATH",
        help=f"where to save (default {default_config_file()})",
    )
    parser.add_argument(
        "--answers",
        metavar="FILE",
        help="answer from a YAML/JSON file of {question key: answer} instead of asking",
    )
    parser.add_argument(
        "--defaults", action="store_true", help="accept every default answer without asking"
    )
    args = parser.parse_args(argv)
    if args.config_file:  # checked before any question is asked
        config_to_write(args.config_file)
    if args.answers or args.defaults:
        answers = _read_answers(args.answers) if args.answers else {}
        ask = ScriptedAsk(answers)
    else:
        if not sys.stdin.isatty():
            raise UsageError(
                "accel config asks questions in a terminal; without one use "
                "`accel config --defaults`, `--answers FILE` or `accel config default`"
            )
        ask = PromptAsk()
    try:
        config = ask_questions(ask)
    except AnswerError as exc:
        raise UsageError(f"--answers: {exc}") from None
    if isinstance(ask, ScriptedAsk) and ask.unused():
        raise UsageError(
            f"--answers: no question has the key {ask.unused()[0]!r}; "
            "see the keys in the accel-cli README"
        )
    data = standard_config()  # core's default config; the answers replace its values
    data.update(config)
    path = Path(args.config_file).expanduser() if args.config_file else default_config_file()
    data = validate(data, str(path))
    check_sections(data, str(path))
    _save(data, path)
    print(f"accel configuration saved at {path}")
    return 0


def _read_answers(path: str) -> dict[str, object]:
    from accel.config.files import read_config_file

    return read_config_file(path)


def _save(data: Mapping[str, object], path: Path) -> None:
    from accel.config.files import save_config_file

    save_config_file(data, path)


def _default(argv: list[str], prog: str) -> int:
    from accel.config.files import default_config_file, write_basic_config

    parser = Parser(
        prog=prog, description="Write a basic config for all of this machine's GPUs (or its CPU)."
    )
    parser.add_argument(
        "--config_file",
        "--config-file",
        "--save_location",
        dest="config_file",
        metavar="PATH",
        help=f"where to save (default {default_config_file()}); .json writes JSON",
    )
    parser.add_argument(
        "--mixed_precision",
        default="no",
        metavar="{no,fp16,bf16,fp8}",
        help="mixed precision to write (default no)",
    )
    args = parser.parse_args(argv)
    if args.config_file:
        config_to_write(args.config_file)
    written = write_basic_config(args.mixed_precision, args.config_file)
    if written is False:
        return 1
    print(f"accel configuration saved at {written}")
    return 0


def _update(argv: list[str], prog: str) -> int:
    from accel.config.files import (
        check_sections,
        default_config_file,
        read_config_file,
        save_config_file,
        standard_config,
        validate,
    )

    parser = Parser(
        prog=prog,
        description="Rewrite an existing config file in the current format, keeping its settings "
        "and adding the keys it lacks. Renamed keys of plugin sections get their current names "
        "(fsdp_backward_prefetch_policy -> fsdp_backward_prefetch) and numbered choices their "
        "names (fsdp_sharding_strategy: 1 -> FULL_SHARD). To move an FSDP1 config to FSDP2, "
        "see `accel to-fsdp2`.",
    )
    parser.add_argument(
        "--config_file",
        "--config-file",
        metavar="PATH",
        help=f"the file to update (default {default_config_file()})",
    )
    args = parser.parse_args(argv)
    if args.config_file:
        config_to_write(config_to_read(args.config_file))
    path = Path(args.config_file).expanduser() if args.config_file else default_config_file()
    if not path.exists():
        raise UsageError(
            f"{path} does not exist; create it with `accel config` or `accel config default`"
        )
    data = validate(_current_sections(read_config_file(path)), str(path))
    check_sections(data, str(path))
    merged = standard_config()
    merged.update(data)
    save_config_file(merged, path)
    print(f"accel configuration updated at {path}")
    return 0


def _current_sections(data: Mapping[str, object]) -> dict[str, object]:
    """``data`` with each declared plugin section in its current spelling (Section.current)."""
    from accel.config.registered import registered_sections

    sections = registered_sections()
    return {
        name: sections[name].current(value)
        if name in sections and isinstance(value, dict)
        else value
        for name, value in data.items()
    }


def _show(argv: list[str], prog: str) -> int:
    from .launch import parse, resolve_from

    def configure(parser: argparse.ArgumentParser) -> None:
        parser.description = (
            "Print every setting `accel launch` would use and where it came from "
            "(default, file, env, flag or derived). Takes the same options as accel launch."
        )
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.add_argument(
            "--resolved", action="store_true", help="(the default) every resolved setting"
        )

    ns, lp = parse(argv, prog, script=False, configure=configure)
    resolved = resolve_from(ns, lp)
    rows = resolved.items()
    if ns.json:
        out = {
            "config_file": str(resolved.config_file) if resolved.config_file else None,
            "settings": {name: {"value": value, "source": str(src)} for name, value, src in rows},
            "notes": resolved.notes,
        }
        print(json.dumps(out, indent=2, default=str))
        return 0
    where = resolved.config_file or "none"
    print(f"config file: {where} ({resolved.config_file_reason})")
    width = max(len(name) for name, _, _ in rows)
    vwidth = min(30, max(len(_fmt(value)) for _, value, _ in rows))
    for name, value, src in rows:
        if value is None and src.kind == "default":
            continue
        print(f"{name:<{width}}  {_fmt(value):<{vwidth}}  {src}")
    for note in resolved.notes:
        print(f"note: {note}")
    return 0


def _fmt(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)
