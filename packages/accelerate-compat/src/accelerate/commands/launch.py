"""``accelerate.commands.launch``: ``accelerate launch`` over ``accel launch``.

TRL's CLI builds ``launch_command_parser().parse_args([...])``, may set fields of the
namespace, and passes it to :func:`launch_command`, which launches what the namespace says
*now*. ``launch_command_parser(subparsers)`` adds ``launch`` to a command's subparsers, as
``accelerate``'s own CLI does.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

PROG = "accelerate launch"
DESCRIPTION = (
    "Launch a python script in a distributed scenario (accel's launcher). Options may be "
    "written with hyphens or underscores (--num-processes or --num_processes)."
)

ACCELERATE_NAMES = {"cpu": "use_cpu"}
"""Accelerate's namespace fields that accel's parser stores under another name."""


class LaunchNamespace(argparse.Namespace):
    """The parsed launch arguments; Accelerate's ``args.cpu`` is accel's ``args.use_cpu``."""

    @property
    def cpu(self) -> bool:
        return bool(getattr(self, "use_cpu", None))

    @cpu.setter
    def cpu(self, value: bool) -> None:
        self.use_cpu = True if value else None


class LaunchCommandParser:
    """The parser of ``accelerate launch``: accel's launch flags (core and installed plugins)."""

    def __init__(self) -> None:
        from accel_cli.launch import build_parser

        self.parser = build_parser(PROG).parser

    def parse_args(
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """Parse and check ``args`` (default: ``sys.argv[1:]``), as ``accelerate launch`` does."""
        from accel_cli.launch import parse

        argv = [str(a) for a in (sys.argv[1:] if args is None else args)]
        ns, _ = parse(argv, prog=PROG)
        result = LaunchNamespace() if namespace is None else namespace
        for name, value in vars(ns).items():
            setattr(result, name, value)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.parser, name)


def launch_command_parser(
    subparsers: argparse._SubParsersAction | None = None,
) -> LaunchCommandParser | argparse.ArgumentParser:
    """The parser of ``accelerate launch``.

    With ``subparsers`` (from ``add_subparsers()``), a ``launch`` subcommand is added there,
    with every flag of accel's launcher and ``func=launch_command``, and returned.
    """
    if subparsers is None:
        return LaunchCommandParser()
    from accel_cli.launch import build_parser
    from accel_cli.parsing import add_hyphenated_spellings

    parser = subparsers.add_parser(
        "launch",
        description=DESCRIPTION,
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    build_parser(PROG, parser=parser)
    add_hyphenated_spellings(parser)
    parser.set_defaults(func=launch_command)
    return parser


def launch_argv(args: argparse.Namespace) -> list[str]:
    """The ``accelerate launch`` arguments ``args`` stands for, with its current values."""
    from accel_cli.launch import argv_from_namespace, build_parser

    ns = argparse.Namespace(**vars(args))
    for name, dest in ACCELERATE_NAMES.items():
        if getattr(ns, dest, None) is None and getattr(args, name, None):
            setattr(ns, dest, True)
    return argv_from_namespace(ns, build_parser(PROG).parser)


def launch_command(args: argparse.Namespace) -> None:
    """Run the launch ``args`` describe; raises ``CalledProcessError`` when the job fails.

    Fields set on ``args`` after parsing (``args.num_processes = 2``,
    ``args.training_script_args = [...]``) are honoured.
    """
    # A child process: a one-process launch replaces the launcher's process, which must not be
    # the caller's (TRL's CLI, a notebook, a test).
    command = [sys.executable, "-m", "accelerate.commands.launch", *launch_argv(args)]
    status = subprocess.run(command).returncode
    if status != 0:
        raise subprocess.CalledProcessError(status, command)


def main() -> None:
    """``python -m accelerate.commands.launch ...`` is ``accelerate launch ...``."""
    from accel_cli.main import run

    raise SystemExit(run(["launch", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
