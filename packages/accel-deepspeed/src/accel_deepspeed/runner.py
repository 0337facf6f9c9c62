"""``python -m accel_deepspeed.runner ...``: DeepSpeed's multi-node runner, forwarding ``ACCEL_*`` variables.

DeepSpeed's runner exports only some variables to the other machines (names starting
with MLFLOW, PYTHON, ...). The workers need the ``ACCEL_*`` settings ``accel launch``
resolved, so this adds that prefix (and ``DS_ACCELERATOR``), then runs ``deepspeed.launcher.runner.main``
with the given arguments unchanged.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    """Run DeepSpeed's runner with ``ACCEL_*`` added to the exported variables."""
    from deepspeed.launcher import runner

    for prefix in ("ACCEL_", "DS_ACCELERATOR"):
        if prefix not in runner.EXPORT_ENVS:
            runner.EXPORT_ENVS.append(prefix)
    runner.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
