"""``accel test``: run the built-in check script under the configured launch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .parsing import Parser


def main(argv: list[str], prog: str = "accel test") -> int:
    """Launch :mod:`accel_cli.test_script` with ``accel launch`` and report pass or fail."""
    parser = Parser(
        prog=prog,
        description="Check that the configured launch works: runs a built-in script "
        "(process state, collective operations, data sharding, training parity with one "
        "process, triggers) through `accel launch`. Any other option is passed to "
        "`accel launch` (e.g. `accel test --cpu --num_processes 2`).",
    )
    parser.add_argument(
        "--config_file", "--config-file", metavar="PATH", help="config file to launch with"
    )
    args, launch_args = parser.parse_known_args(argv)
    if args.config_file:  # the same error as accel launch's, under this command's name
        from .config_paths import read_config

        read_config(args.config_file)
    script = Path(__file__).with_name("test_script.py")
    command = [sys.executable, "-m", "accel_cli.main", "launch"]
    if args.config_file:
        command += ["--config_file", args.config_file]
    command += [*launch_args, str(script)]
    print(f"Running: {' '.join(['accel', 'launch', *command[4:]])}", flush=True)
    code = subprocess.call(command)
    if code == 2:
        return 2  # bad input, already explained by accel launch
    if code == 0:
        print("accel test: PASSED")
    else:
        print(f"accel test: FAILED (exit code {code}); see the output above", file=sys.stderr)
    return 0 if code == 0 else 1
