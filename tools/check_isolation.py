"""Install each plugin with accel-core only, into a fresh virtual environment, and check it.

    uv run python tools/check_isolation.py [--only accel-fsdp,...] [--keep DIR]

For each package of packages/: a new venv, ``uv pip install ./packages/accel-core
./packages/<package>`` (from the source folders, plus the accel packages it declares, e.g.
accel-cli for accel-cluster), then: the package imports, its entry points are registered in
the group ``accel`` and load, and no other accel distribution was installed. This is what
a user's ``pip install accel-core accel-<x>`` gives; CI runs each package's tests in such an
environment (.github/workflows/ci.yml, job ``isolated``). Prints the time of each package.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _dists import dists, run, smoke  # noqa: E402
from build_dists import accel_requirements  # noqa: E402


def main() -> int:
    """Check every package (or those of ``--only``); 1 on the first failure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="")
    parser.add_argument("--keep", default=None, help="create the venvs here and keep them")
    args = parser.parse_args()
    only = {n for n in args.only.split(",") if n}
    by_name = {d.name: d for d in dists()}
    root = Path(args.keep or tempfile.mkdtemp(prefix="accel-isolation-"))
    start = time.monotonic()
    try:
        for dist in dists():
            if only and dist.name not in only:
                continue
            t = time.monotonic()
            venv = root / dist.name
            run("uv", "venv", "--quiet", "--python", sys.executable, venv, timeout=300)
            python = venv / "bin" / "python"
            needed = list(dict.fromkeys(["accel-core", dist.name, *accel_requirements(dist.path)]))
            paths = [by_name[n].path for n in needed]
            run("uv", "pip", "install", "--quiet", "--python", python, *paths, timeout=900)
            info = smoke(python, dist)
            if sorted(info["accel"]) != sorted(needed):
                print(f"{dist.name}: installed {info['accel']}, expected {sorted(needed)}")
                return 1
            eps = ", ".join(dist.entry_points) or "no entry point"
            print(
                f"ok {dist.name} ({eps}) alone with {needed} ({time.monotonic() - t:.1f} s)",
                flush=True,
            )
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"total {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
