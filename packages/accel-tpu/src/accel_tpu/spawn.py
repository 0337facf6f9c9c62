"""``python -m accel_tpu.spawn``: what ``accel launch --tpu`` runs on a TPU host.

Imports the training script as a module, finds its ``main_training_function`` and runs
it on every XLA device through ``xmp.spawn`` (torch_xla spawns the processes; several
devices per process run as threads). The script's own arguments are in ``sys.argv``
of every replica, as if it had been run directly.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from .replica import report_failure, spawn


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m accel_tpu.spawn", description=__doc__)
    parser.add_argument("--main_training_function", default="main")
    parser.add_argument("--num_processes", type=int, default=None)
    parser.add_argument("--module", action="store_true", help="the script is a module name")
    parser.add_argument("training_script")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return parser


def load_function(script: str, function: str, module: bool = False):
    """``function`` of the training script (a path, or a module name with ``module``)."""
    if module:
        name = script
    else:
        path = Path(script).resolve()
        sys.path.insert(0, str(path.parent))
        name = path.stem
    loaded = importlib.import_module(name)
    target = getattr(loaded, function, None)
    if not callable(target):
        raise LookupError(
            f"{script} has no function {function!r}; set main_training_function "
            "(--main_training_function) to the function that trains"
        )
    return target


def main(argv: list[str] | None = None) -> None:
    """Run the training script's main function on every XLA device."""
    args = _parser().parse_args(argv)
    sys.argv = [args.training_script, *args.training_script_args]
    try:
        target = load_function(args.training_script, args.main_training_function, args.module)
    except LookupError as exc:
        report_failure("all", exc, with_traceback=False)
        raise SystemExit(1) from None
    except Exception as exc:  # the script failed while being imported
        report_failure("all", exc)
        raise SystemExit(1) from None
    spawn(target, num_processes=args.num_processes)


if __name__ == "__main__":
    main()
