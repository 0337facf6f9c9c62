"""Wall time of the ``accel`` command against Accelerate's, in fresh processes.

Measured, each ``--runs`` times, interleaved: ``accel --help``, ``accel launch --help``,
``accel env`` and, when Accelerate is installed (``tools/bench/accelerate_env.py``), the same
three ``accelerate`` commands. Baselines: ``python -c pass`` and ``python -c "import torch"``.
Reported: the best and the median of each, and accel's median as a fraction of
Accelerate's. ``accel launch --help`` has a budget of 0.25 s.

By default byte-code is written under a private cache (``PYTHONPYCACHEPREFIX``) and one
unmeasured run fills it, so the figures are those of a normal installation even where
``PYTHONDONTWRITEBYTECODE`` is set; ``--no-bytecode-cache`` measures the environment as is.

    uv run python tools/bench/cli_startup.py
    uv run python tools/bench/accelerate_env.py tools/bench/cli_startup.py --runs 7
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from accelerate_env import ACCELERATE_HINT, has_real_accelerate  # tools/bench/, beside this file

BUDGET_S = {"accel launch --help": 0.25}


def _bin(name: str) -> str | None:
    local = Path(sys.executable).with_name(name)
    if local.exists():
        return str(local)
    return shutil.which(name)


def _time(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (default 5)")
    parser.add_argument("--no-bytecode-cache", action="store_true", help="measure the env as is")
    parser.add_argument(
        "--plugins",
        default=None,
        help="ACCEL_PLUGINS for the accel runs (default: every installed plugin)",
    )
    args = parser.parse_args()

    env = dict(os.environ)
    cache = None
    if not args.no_bytecode_cache:
        cache = tempfile.mkdtemp(prefix="accel-bench-pyc-")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = cache
    config_dir = tempfile.mkdtemp(prefix="accel-bench-cfg-")
    env["ACCEL_CONFIG_DIR"] = config_dir
    env["HF_HOME"] = config_dir  # Accelerate's config lives under $HF_HOME/accelerate
    accel_env = dict(env)
    if args.plugins is not None:
        accel_env["ACCEL_PLUGINS"] = args.plugins

    py = sys.executable
    accel = _bin("accel")
    accelerate = _bin("accelerate") if has_real_accelerate() else None
    if accel is None:
        print("the `accel` command is not installed: uv sync first", file=sys.stderr)
        return 2
    cases: list[tuple[str, list[str], dict[str, str]]] = [
        ("python -c pass", [py, "-c", "pass"], env),
        ("python -c 'import torch'", [py, "-c", "import torch"], env),
        ("accel --help", [accel, "--help"], accel_env),
        ("accel launch --help", [accel, "launch", "--help"], accel_env),
        ("accel env", [accel, "env"], accel_env),
    ]
    pairs = {"accel --help": None, "accel launch --help": None, "accel env": None}
    if accelerate is not None:
        for name, tail in (
            ("--help", ["--help"]),
            ("launch --help", ["launch", "--help"]),
            ("env", ["env"]),
        ):
            label = f"accelerate {name}"
            cases.append((label, [accelerate, *tail], env))
            pairs[f"accel {name}"] = label
    for _, argv, e in cases:  # warm-up: fills the byte-code cache and the OS caches
        _time(argv, e)
    times: dict[str, list[float]] = {label: [] for label, _, _ in cases}
    for _ in range(args.runs):
        for label, argv, e in cases:
            times[label].append(_time(argv, e))

    print(f"{'command':<30} {'best s':>8} {'median s':>9}")
    for label, values in times.items():
        print(f"{label:<30} {min(values):>8.3f} {statistics.median(values):>9.3f}")
    print()
    failed = False
    for mine, theirs in pairs.items():
        median = statistics.median(times[mine])
        line = f"{mine:<22} median {median:.3f} s"
        if theirs is not None:
            ratio = median / statistics.median(times[theirs])
            line += f"  = {ratio:.2f} x `{theirs}` ({statistics.median(times[theirs]):.3f} s)"
        budget = BUDGET_S.get(mine)
        if budget is not None:
            ok = min(times[mine]) < budget
            failed |= not ok
            line += f"  [budget {budget} s: {'ok' if ok else 'MISSED'} at best {min(times[mine]):.3f} s]"
        print(line)
    if accelerate is None:
        print("(Accelerate is not in this environment: " + ACCELERATE_HINT + ")")
    if cache:
        shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(config_dir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
