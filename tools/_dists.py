"""What tools/build_dists.py and tools/check_isolation.py share: the distributions and their checks."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
PACKAGES = REPO / "packages"
VERSION = (REPO / "VERSION").read_text(encoding="utf-8").strip()


@dataclass
class Dist:
    """One distribution of packages/: its name, import name and entry points in group ``accel``."""

    name: str
    path: Path
    import_name: str
    entry_points: dict[str, str]
    version: str = VERSION
    """The repository's VERSION, or the static version of the pyproject (accelerate-compat's)."""
    python: str | None = None  # a Python version the package needs its own environment for


def dists() -> list[Dist]:
    """Every distribution under packages/, accel-core first."""
    found = []
    for pyproject in sorted(PACKAGES.glob("*/pyproject.toml")):
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        project = data["project"]
        (import_name,) = [
            Path(p).name for p in data["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
        ]
        found.append(
            Dist(
                project["name"],
                pyproject.parent,
                import_name,
                dict(project.get("entry-points", {}).get("accel", {})),
                project.get("version", VERSION),
            )
        )
    return sorted(found, key=lambda d: (d.name != "accel-core", d.name))


SMOKE = r"""
import importlib, importlib.metadata as md, json, sys
name, import_name, expected = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
module = importlib.import_module(import_name)
eps = {ep.name: ep.value for ep in md.entry_points(group="accel") if ep.dist.name == name}
assert eps == expected, f"entry points of {name}: {eps}, expected {expected}"
for ep in md.entry_points(group="accel"):
    if ep.dist.name == name:
        ep.load()  # the plugin module imports (it must stay light)
installed = sorted(
    d.metadata["Name"] for d in md.distributions()
    if d.metadata["Name"].startswith("accel-") or d.metadata["Name"] == "accelerate"
)
print(json.dumps({"version": md.version(name), "accel": installed}))
"""


def smoke(python: Path, dist: Dist) -> dict:
    """Import ``dist`` in the environment of ``python``, check and load its entry points."""
    import json

    out = subprocess.run(
        [str(python), "-c", SMOKE, dist.name, dist.import_name, json.dumps(dist.entry_points)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{dist.name}: smoke test failed\n{out.stdout}\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(*args: str | Path, **kwargs) -> subprocess.CompletedProcess:
    """Run a command, fail loudly with its output."""
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-4000:] + result.stderr[-4000:])
        raise SystemExit(f"failed: {' '.join(str(a) for a in args)}")
    return result
