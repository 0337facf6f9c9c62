"""``accel tpu-config``: run setup commands on every worker of a TPU pod (a plugin CLI command).

Builds ``gcloud [alpha] compute tpus tpu-vm ssh NAME --zone ZONE --command "cd /usr/share;
[pip install accel-tpu;] CMD; ..." --worker all`` as an argv list and runs it (or prints
it with ``--debug``). ``tpu_name``, ``tpu_zone``, ``commands`` and ``command_file`` default
to the config file's values.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from typing import Any

from . import pod


class TPUConfigCommand:
    """The ``accel tpu-config`` subcommand (contributed through ``accel_cli_commands``)."""

    name = "tpu-config"
    help = "run setup commands on every worker of a TPU pod (gcloud ssh)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Accelerate's ``tpu-config`` options (``--install_accel`` for ``--install_accelerate``)."""
        config = parser.add_argument_group("config arguments (default: the config file's)")
        config.add_argument("--config_file", "--config-file", default=None, metavar="PATH")
        config.add_argument("--tpu_name", default=None, metavar="NAME", help="the TPU pod")
        config.add_argument("--tpu_zone", default=None, metavar="ZONE", help="its zone")
        pod_args = parser.add_argument_group("what runs on the pod")
        pod_args.add_argument(
            "--use_alpha", action="store_true", help="use `gcloud alpha` instead of `gcloud`"
        )
        pod_args.add_argument(
            "--command_file", default=None, metavar="FILE", help="a file of commands, one a line"
        )
        pod_args.add_argument(
            "--command",
            action="append",
            nargs="+",
            metavar="CMD",
            help="a command to run on each worker (repeatable)",
        )
        pod_args.add_argument(
            "--install_accel",
            "--install_accelerate",
            dest="install_accel",
            action="store_true",
            help="pip install accel-tpu on each worker first",
        )
        pod_args.add_argument(
            "--accel_version",
            "--accelerate_version",
            dest="accel_version",
            default="latest",
            metavar="VERSION",
            help="with --install_accel: latest (default), a version, or a pip requirement",
        )
        pod_args.add_argument(
            "--debug", action="store_true", help="print the command instead of running it"
        )

    def run(self, args: argparse.Namespace) -> int:
        """Build the gcloud command, then print it (``--debug``) or run it."""
        argv = build_command(args)
        if args.debug:
            sys.stdout.write(f"Running {shlex.join(argv)}\n")
            return 0
        try:
            result = subprocess.run(argv, check=False)
        except FileNotFoundError:
            from accel.errors import UsageError

            raise UsageError(
                "gcloud is not installed: install the Google Cloud CLI, or pass --debug to "
                "print the command"
            ) from None
        if result.returncode == 0:
            sys.stdout.write("Successfully set up the pod.\n")
        return result.returncode


def _defaults(config_file: str | None) -> dict[str, Any]:
    from accel.config.files import find_config_file, load_config_file

    path, _ = find_config_file(config_file)
    if path is None:
        return {}
    if not path.is_file():
        from accel.errors import ConfigError

        raise ConfigError(f"config file {path} does not exist")
    return load_config_file(path, check_plugins=False)


def build_command(args: argparse.Namespace) -> list[str]:
    """The gcloud argv for parsed ``accel tpu-config`` arguments (config file for what is missing)."""
    defaults = _defaults(args.config_file)
    commands = [" ".join(parts) for parts in args.command or []]
    command_file = args.command_file
    if not commands and not command_file:
        command_file = defaults.get("command_file")
        if not command_file:
            commands = list(defaults.get("commands") or [])
    lines = pod.setup_commands(commands, command_file, args.install_accel, args.accel_version)
    return pod.gcloud_ssh(
        args.tpu_name or defaults.get("tpu_name"),
        args.tpu_zone or defaults.get("tpu_zone"),
        "; ".join(lines),
        use_alpha=args.use_alpha,
    )
