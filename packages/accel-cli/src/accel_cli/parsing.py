"""Argument parsing shared by the subcommands: one-line errors, exit status 2."""

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

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message`` and exit 2."""
        fail(f"{message} (see `{self.prog} --help`)", prog=self.prog)


def fail(message: str, prog: str = "accel", code: int = 2) -> NoReturn:
    """Print one error line for ``prog`` and exit."""
    line = " ".join(str(message).split("\n"))
    sys.stderr.write(f"{prog}: error: {line}\n")
    raise SystemExit(code)


__all__ = ["Parser", "UsageError", "fail"]
