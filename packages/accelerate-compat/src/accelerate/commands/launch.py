"""``accelerate.commands.launch``: ``accelerate launch`` over ``accel launch``.

TRL's CLI builds ``launch_command_parser().parse_args([...])`` and passes the result to
:func:`launch_command`; both run accel's launcher with the same arguments.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

PROG = "accelerate launch"


class LaunchCommandParser:
    """The parser of ``accelerate launch``: accel's launch flags (core and installed plugins)."""

    def __init__(self) -> None:
        from accel_cli.launch import build_parser

        self.parser = build_parser(PROG).parser

    def parse_args(
        self, args: list[str] | None = None, namespace: Any = None
    ) -> argparse.Namespace:
        """Parse and check ``args`` (default: ``sys.argv[1:]``); the namespace keeps them."""
        from accel_cli.launch import parse

        argv = [str(a) for a in (sys.argv[1:] if args is None else args)]
        ns, _ = parse(argv, prog=PROG)
        ns.accel_argv = argv
        return ns

    def __getattr__(self, name: str) -> Any:
        return getattr(self.parser, name)


def launch_command_parser(subparsers: Any = None) -> LaunchCommandParser:
    """The parser of ``accelerate launch`` (``subparsers`` is accepted and ignored)."""
    return LaunchCommandParser()


def launch_command(args: argparse.Namespace) -> None:
    """Run the launch ``args`` describe; raises ``CalledProcessError`` when the job fails."""
    argv = getattr(args, "accel_argv", None)
    if argv is None:
        raise TypeError(
            "launch_command needs the namespace returned by launch_command_parser().parse_args()"
        )
    # A child process: a one-process launch replaces the launcher's process, which must not be
    # the caller's (TRL's CLI, a notebook, a test).
    command = [sys.executable, "-m", "accelerate.commands.launch", *argv]
    status = subprocess.run(command).returncode
    if status != 0:
        raise subprocess.CalledProcessError(status, command)


def main() -> None:
    """``python -m accelerate.commands.launch ...`` is ``accelerate launch ...``."""
    from accel_cli.main import run

    raise SystemExit(run(["launch", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
