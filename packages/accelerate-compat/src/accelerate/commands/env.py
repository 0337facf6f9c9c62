"""``accelerate.commands.env``: ``accelerate env`` over ``accel env``."""

from __future__ import annotations

import argparse


def env_command(args: argparse.Namespace | None = None) -> int:
    """Print the environment block for a bug report (``accelerate env``)."""
    from accel_cli.env_cmd import main

    config_file = getattr(args, "config_file", None)
    return main(["--config_file", str(config_file)] if config_file else [], "accelerate env")
