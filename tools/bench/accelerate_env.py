"""Run a benchmark of tools/bench/ with Accelerate beside accel, in an environment of their own.

The workspace's ``accelerate`` is accel's compat distribution, so the benchmarks that compare
accel with Accelerate in one process (step_overhead, checkpoint_io, load_checkpoint,
cli_startup) need another environment: ``.cache/accelerate-bench/venv`` (git-ignored), built on
first use with ``uv``: the real Accelerate (tools/accelerate_reference.py's version), the
workspace's torch, and accel's packages installed editable from this checkout (never the
compat distribution).

    uv run python tools/bench/accelerate_env.py tools/bench/step_overhead.py --control
    uv run python tools/bench/accelerate_env.py --python        # print the interpreter's path
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

VENV = ROOT / ".cache" / "accelerate-bench" / "venv"

ACCELERATE_HINT = "run the benchmark through tools/bench/accelerate_env.py to compare with it"
"""What the benchmarks print when the environment has no real Accelerate."""

PACKAGES = (
    "accel-core",
    "accel-cli",
    "accel-ddp",
    "accel-fsdp",
    "accel-deepspeed",
    "accel-profiler",
    "accel-trackers",
)
"""accel's distributions the benchmarks use (editable, from packages/)."""


def python() -> Path:
    """The bench environment's interpreter, created or brought up to date first."""
    import accelerate_reference as ref

    wanted = ref.requirements_for([])
    for package in PACKAGES:
        wanted += ["-e", str(ROOT / "packages" / package)]
    return ref.ensure_venv(VENV, wanted)


def has_real_accelerate() -> bool:
    """Whether ``import accelerate`` here is Hugging Face Accelerate (not accel's compat package)."""
    try:
        import accelerate
    except ImportError:
        return False
    accelerator = getattr(accelerate, "Accelerator", None)
    return accelerator is not None and not accelerator.__module__.startswith("accel.")


def main(argv: list[str]) -> int:
    """Run ``argv`` (a script and its arguments) with the bench environment's interpreter."""
    interpreter = python()
    if argv[:1] == ["--python"]:
        print(interpreter)
        return 0
    if not argv:
        raise SystemExit("usage: accelerate_env.py SCRIPT [ARGS...]   (or --python)")
    os.execv(str(interpreter), [str(interpreter), *argv])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
