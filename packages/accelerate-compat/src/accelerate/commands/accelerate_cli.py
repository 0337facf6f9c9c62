"""The ``accelerate`` command: accel's CLI under Accelerate's name."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run ``accelerate <command> ...`` as ``accel <command> ...``."""
    from accel_cli.main import main as accel_main

    return accel_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
