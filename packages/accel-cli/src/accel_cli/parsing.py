"""Argument parsing shared by the subcommands: one-line errors, exit status 2, and every
``--an_option`` also accepted as ``--an-option`` (as Accelerate's commands accept both)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from accel.errors import UsageError


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage dump) and exit with status 2."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        """Parse like argparse, after giving each ``--a_b`` option its ``--a-b`` spelling."""
        add_hyphenated_spellings(self)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message`` and exit 2."""
        fail(f"{message} (see `{self.prog} --help`)", prog=self.prog)


def hyphenated(option: str) -> str:
    """``--num-processes`` for ``--num_processes`` (other strings unchanged)."""
    if option.startswith("--"):
        return "--" + option[2:].replace("_", "-")
    return option


def underscored(option: str) -> str:
    """``--num_processes`` for ``--num-processes`` (other strings unchanged)."""
    if option.startswith("--"):
        return "--" + option[2:].replace("-", "_")
    return option


def add_hyphenated_spellings(parser: argparse.ArgumentParser) -> None:
    """Let every ``--a_b`` option of ``parser`` (plugins' included) also be given as ``--a-b``.

    The other spelling is only looked up, not listed, so ``--help`` shows each option once;
    a spelling some option already owns is left to it.
    """
    table = parser._option_string_actions
    for action in list(parser._actions):
        for option in action.option_strings:
            other = hyphenated(option)
            if other != option and other not in table:
                table[other] = action


def fail(message: str, prog: str = "accel", code: int = 2) -> NoReturn:
    """Print one error line for ``prog`` and exit."""
    line = " ".join(str(message).split("\n"))
    sys.stderr.write(f"{prog}: error: {line}\n")
    raise SystemExit(code)


__all__ = [
    "Parser",
    "UsageError",
    "add_hyphenated_spellings",
    "fail",
    "hyphenated",
    "underscored",
]
