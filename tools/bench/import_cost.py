"""What ``import accel`` costs on top of ``import torch``, in fresh interpreters.

Each statement runs in its own subprocess (``python -c``), ``--runs`` times,
interleaved; inside the child the import is timed, so the interpreter's own start-up
is left out. The clock is the child's CPU time by default (``process_time``: a busy
machine stretches wall-clock time, not CPU time); ``--clock wall`` uses
``perf_counter``. Reported: the median of each statement,
and the differences that matter:

* ``import accel`` alone (it must not import torch: everything is lazy);
* ``import torch; import accel; from accel import Accelerator`` minus ``import torch``
  (what a training script pays for accel), with the same split measured inside
  one process as a cross-check.

The target is < 50 ms, judged on the in-process split (the difference of two
medians of second-long ``import torch`` runs carries their noise). When it is missed (or with ``--importtime``) the modules
imported after torch are listed from ``python -X importtime``.

By default the children write and read byte-code under a private cache directory
(``PYTHONPYCACHEPREFIX``) and one unmeasured warm-up run fills it, so the figures
are those of a normal installation even where ``PYTHONDONTWRITEBYTECODE`` is set.
``--no-bytecode-cache`` measures the environment as it is.

    uv run python tools/bench/import_cost.py
    uv run python tools/bench/import_cost.py --runs 11 --importtime
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET_MS = 50.0

TIMER = "import time as _t\n_s = _t.{clock}()\n{body}\nprint(_t.{clock}() - _s)\n"

STATEMENTS: dict[str, str] = {
    "torch": "import torch",
    "accel": "import accel",
    "torch+accel": "import torch\nimport accel\nfrom accel import Accelerator",
}

SPLIT = (
    "import time as _t\n"
    "_s = _t.{clock}()\n"
    "import torch\n"
    "_m = _t.{clock}()\n"
    "import accel\n"
    "from accel import Accelerator\n"
    "_e = _t.{clock}()\n"
    "print(_m - _s, _e - _m)\n"
)

CLOCKS = {"cpu": "process_time", "wall": "perf_counter"}


def child_env(bytecode_cache: bool) -> dict[str, str]:
    env = dict(os.environ)
    if bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cache = Path(tempfile.gettempdir()) / "accel-import-cost-pycache"
        cache.mkdir(exist_ok=True)
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def run_child(code: str, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, *flags, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    if result.returncode != 0:
        raise SystemExit(f"child failed ({result.returncode}):\n{code}\n{result.stderr}")
    return result


def measure(
    runs: int, env: dict[str, str], clock: str
) -> tuple[dict[str, list[float]], list[tuple]]:
    """Seconds per statement, and (torch, accel after torch) from the split child."""
    times: dict[str, list[float]] = {name: [] for name in STATEMENTS}
    splits: list[tuple] = []
    names = list(STATEMENTS)
    for index in range(runs):
        order = names if index % 2 == 0 else names[::-1]
        for name in order:
            code = TIMER.format(body=STATEMENTS[name], clock=clock)
            out = run_child(code, env).stdout.split()
            times[name].append(float(out[-1]))
        torch_s, accel_s = run_child(SPLIT.format(clock=clock), env).stdout.split()
        splits.append((float(torch_s), float(accel_s)))
    return times, splits


def accel_pulls_torch(env: dict[str, str]) -> bool:
    code = "import sys, accel\nprint('torch' in sys.modules)"
    return run_child(code, env).stdout.strip() == "True"


_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def importtime_report(env: dict[str, str], top: int = 20) -> None:
    """Modules imported after torch by ``import accel; from accel import Accelerator``."""
    code = "import torch\nimport accel\nfrom accel import Accelerator"
    stderr = run_child(code, env, "-X", "importtime").stderr.splitlines()
    after_torch = False
    entries: list[tuple[int, int, int, str]] = []
    for line in stderr:
        match = _LINE.match(line)
        if not match:
            continue
        self_us, cumulative_us, indent, name = match.groups()
        if not after_torch:
            after_torch = name == "torch" and len(indent) == 1
            continue
        entries.append((int(self_us), int(cumulative_us), (len(indent) - 1) // 2, name))
    total = sum(e[1] for e in entries if e[2] == 0)
    print(f"\npython -X importtime: {total / 1000:.1f} ms imported after torch (cumulative)")
    print("top-level imports after torch:")
    for _self_us, cumulative_us, depth, name in entries:
        if depth == 0:
            print(f"  {cumulative_us / 1000:8.1f} ms  {name}")
    print(f"largest own (self) times among them, top {top}:")
    for self_us, cumulative_us, _depth, name in sorted(entries, reverse=True)[:top]:
        print(f"  {self_us / 1000:8.1f} ms self  {cumulative_us / 1000:8.1f} ms cum  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="subprocesses per statement")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="do not give the children a byte-code cache (measure the environment as is)",
    )
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="cpu",
        help="cpu: the child's CPU time (robust on a busy machine); wall: perf_counter",
    )
    parser.add_argument("--importtime", action="store_true", help="always print the breakdown")
    parser.add_argument("--fail-above", type=float, default=None, help="exit 1 above this many ms")
    args = parser.parse_args(argv)

    env = child_env(bytecode_cache=not args.no_bytecode_cache)
    clock = CLOCKS[args.clock]
    for body in STATEMENTS.values():
        # warm-up: fills the byte-code cache, warms the page cache
        run_child(TIMER.format(body=body, clock=clock), env)

    times, splits = measure(args.runs, env, clock)
    medians = {name: statistics.median(values) * 1000 for name, values in times.items()}
    print(
        f"{sys.executable}\n{args.runs} fresh interpreters per statement, {args.clock} clock, "
        f"byte-code cache {'off' if args.no_bytecode_cache else 'on'}\n"
    )
    for name, body in STATEMENTS.items():
        shown = body.replace("\n", "; ")
        print(f"  {medians[name]:8.1f} ms  median  {shown}")
    bare = medians["accel"]
    above = medians["torch+accel"] - medians["torch"]
    split_torch = statistics.median(s[0] for s in splits) * 1000
    split_accel = statistics.median(s[1] for s in splits) * 1000
    print(
        f"\n  import accel alone:                          {bare:8.1f} ms"
        f"  (imports torch: {'yes' if accel_pulls_torch(env) else 'no'})"
    )
    print(
        f"  accel + Accelerator above import torch:      {above:8.1f} ms  (difference of medians)"
    )
    print(
        f"  same, measured inside one process:           {split_accel:8.1f} ms"
        f"  (torch there: {split_torch:.1f} ms)"
    )
    torch_values = sorted(times["torch"])
    quartiles = statistics.quantiles(torch_values, n=4) if len(torch_values) > 1 else [0, 0, 0]
    spread = (quartiles[2] - quartiles[0]) * 1000
    print(f"  spread (IQR) of import torch alone:          {spread:8.1f} ms")
    if abs(above - split_accel) > max(spread, 10.0):
        print(
            "  note: the difference of medians is dominated by the noise of import torch;"
            " the in-process figure is the one to trust"
        )
    # The in-process split times exactly the accel imports; the difference of two
    # medians of ~seconds-long imports carries the noise of both.
    verdict = "meets" if split_accel < TARGET_MS else "misses"
    print(f"\naccel {verdict} the target < {TARGET_MS:.0f} ms above import torch")
    if args.importtime or split_accel >= TARGET_MS:
        importtime_report(env)
    if args.fail_above is not None and split_accel > args.fail_above:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
