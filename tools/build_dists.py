"""Build a wheel and an sdist of every distribution in packages/, then install each wheel alone.

    uv run python tools/build_dists.py [--out dist] [--no-check] [--only accel-fsdp,...]

1. ``uv build`` of each package into ``dist/`` (a wheel built from its sdist, as an index
   would), all at the version of the repository's ``VERSION`` file (accelerate-compat: its
   pyproject's ``1.15.0.<N>``, N from VERSION), and ``dist/accel-constraints.txt`` pinning each
   distribution to its version: the constraints file docs/hf-libraries.md installs with.
2. For each wheel: a fresh virtual environment, ``uv pip install`` of that wheel plus the
   wheels of the accel distributions it declares (files from ``dist/``, never an index);
   third-party dependencies come from the package index as for a user. Then an import of
   the package, its ``accel`` entry points checked and loaded, and a check that no other
   accel distribution was installed.

Prints the time of each step. Exits 1 on the first failure.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import tomllib

sys.path.insert(0, str(Path(__file__).parent))
from _dists import REPO, dists, run, smoke  # noqa: E402


def accel_requirements(path: Path) -> list[str]:
    """The accel-* distributions ``path``'s pyproject depends on, transitively."""
    by_name = {d.name: d for d in dists()}
    seen: list[str] = []

    def visit(p: Path) -> None:
        deps = tomllib.loads((p / "pyproject.toml").read_text())["project"].get("dependencies", [])
        for dep in deps:
            name = re.match(r"[A-Za-z0-9_.-]+", dep)[0]
            if name.startswith("accel-") and name not in seen:
                seen.append(name)
                visit(by_name[name].path)

    visit(path)
    return seen


def main() -> int:
    """Build, then check each wheel in its own environment."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "dist"))
    parser.add_argument("--no-check", action="store_true", help="build only")
    parser.add_argument("--only", default="", help="comma-separated distributions to check")
    args = parser.parse_args()
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    start = time.monotonic()
    for dist in dists():
        t = time.monotonic()
        run("uv", "build", "--quiet", "--out-dir", out, dist.path, timeout=600)
        print(f"built {dist.name} {dist.version} ({time.monotonic() - t:.1f} s)", flush=True)
    (out / "accel-constraints.txt").write_text("".join(f"{d.name}=={d.version}\n" for d in dists()))
    wheels = sorted(out.glob("*.whl"))
    sdists = sorted(out.glob("*.tar.gz"))
    print(f"{len(wheels)} wheels, {len(sdists)} sdists in {out} ({time.monotonic() - start:.1f} s)")
    expected = len(dists())
    if len(wheels) != expected or len(sdists) != expected:
        print(f"expected {expected} of each", file=sys.stderr)
        return 1
    if args.no_check:
        return 0
    wheel_of = {w.name.split("-")[0].replace("_", "-"): w for w in wheels}
    only = {n for n in args.only.split(",") if n}
    with tempfile.TemporaryDirectory(prefix="accel-dists-") as tmp:
        for dist in dists():
            if only and dist.name not in only:
                continue
            t = time.monotonic()
            venv = Path(tmp) / dist.name
            run("uv", "venv", "--quiet", "--python", sys.executable, venv, timeout=300)
            python = venv / "bin" / "python"
            needed = [dist.name, *accel_requirements(dist.path)]
            files = [wheel_of[n] for n in needed]
            run("uv", "pip", "install", "--quiet", "--python", python, *files, timeout=900)
            info = smoke(python, dist)
            if sorted(info["accel"]) != sorted(needed) or info["version"] != dist.version:
                print(f"{dist.name}: installed {info}, expected {sorted(needed)} at {dist.version}")
                return 1
            print(
                f"ok {dist.name}: wheel installs alone with {', '.join(needed[1:]) or 'nothing else of accel'}"
                f" ({time.monotonic() - t:.1f} s)",
                flush=True,
            )
    print(f"total {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
