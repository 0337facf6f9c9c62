"""Install the compat distribution from built wheels, as docs/hf-libraries.md says, and use it.

    uv run python tools/check_compat_install.py [--keep DIR] [--no-launch]

1. ``uv build --wheel`` of ``accelerate`` (packages/accelerate-compat) and of the accel
   distributions it requires (accel-core, accel-cli, accel-ddp, ...) into ``DIR/wheels``, with
   ``DIR/wheels/accel-constraints.txt`` pinning each to its version (what a release ships).
2. A clean venv (``uv venv``); ``uv pip install --find-links DIR/wheels -c <constraints>
   accelerate transformers peft trl``, where the constraints are accel's file plus the
   workspace's ``uv.lock`` (``uv export``), so third-party versions are the locked ones and come
   from uv's cache or the index. Then ``uv pip install --upgrade accelerate transformers``:
   the constraint must keep accel's build.
3. In the venv: ``importlib.metadata.version("accelerate")`` is accel's build and requires
   accel-core, ``accelerate`` is the venv's compat package (the alias finder) with accel's
   ``Accelerator``, no other ``accelerate`` is installed, ``import transformers, peft, trl``,
   and a ``Trainer`` on a tiny local GPT-2 trains 2 steps. Then (unless ``--no-launch``) the
   venv's ``accelerate launch --cpu --num_processes 2`` runs a ``Trainer`` on 2 processes.

Prints the time of each step and one JSON line with what it found; exits 1 on a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _dists import REPO, dists, run  # noqa: E402
from build_dists import accel_requirements  # noqa: E402

HF_STACK = REPO / "integration-tests" / "hf_stack"
LIBRARIES = ("transformers", "peft", "trl")

CHECK = r"""
import importlib.metadata as md, json, sys, tempfile
from pathlib import Path
import accel, accelerate
file = Path(accelerate.__file__).resolve()
info = {
    "version": md.version("accelerate"),
    "__version__": accelerate.__version__,
    "requires": md.requires("accelerate") or [],
    "file": str(file),
    "in_venv": file.is_relative_to(Path(sys.prefix).resolve()),
    "alias": "_AliasFinder" in file.read_text(),
    "accels_accelerator": issubclass(accelerate.Accelerator, accel.Accelerator),
    "accelerate_dists": sum(1 for d in md.distributions() if d.metadata["Name"] == "accelerate"),
    "accel_dists": sorted(
        d.metadata["Name"] for d in md.distributions() if d.metadata["Name"].startswith("accel-")
    ),
}
import peft, transformers, trl
info["libraries"] = {m.__name__: m.__version__ for m in (transformers, peft, trl)}
sys.path.insert(0, sys.argv[1])
import tiny
from transformers import Trainer
with tempfile.TemporaryDirectory() as out:
    trainer = Trainer(model=tiny.gpt2(), args=tiny.training_args(out, max_steps=2),
                      train_dataset=tiny.lm_dataset())
    trainer.train()
info["trainer_accelerator"] = type(trainer.accelerator).__module__
info["trainer_on_accel"] = isinstance(trainer.accelerator, accel.Accelerator)
info["trainer_steps"] = trainer.state.global_step
print(json.dumps(info))
"""


def locked_constraints() -> list[str]:
    """The workspace's uv.lock as pip constraints (third-party packages only)."""
    result = run(
        "uv", "export", "--locked", "--format", "requirements-txt", "--no-hashes",
        "--no-emit-workspace", "--no-header", "--no-annotate", "--all-groups",
        cwd=REPO, timeout=120,
    )  # fmt: skip
    return [
        line
        for line in result.stdout.splitlines()
        if line.strip() and not line.startswith(("-e", "#", " ", "."))
    ]


def build_wheels(out: Path) -> dict[str, str]:
    """Wheels of the compat distribution and the accel distributions it requires; name -> version."""
    by_name = {d.name: d for d in dists()}
    compat = by_name["accelerate"]
    needed = [compat.name, *accel_requirements(compat.path)]
    for name in needed:
        run("uv", "build", "--wheel", "--quiet", "--out-dir", out, by_name[name].path, timeout=600)
    versions = {name: by_name[name].version for name in needed}
    (out / "accel-constraints.txt").write_text("".join(f"{n}=={v}\n" for n, v in versions.items()))
    return versions


def install_venv(
    venv: Path, wheels: Path, constraints: Path, requirements: tuple[str, ...]
) -> Path:
    """A new venv at ``venv`` with ``accelerate`` (from ``wheels``) and ``requirements``; its python.

    ``constraints`` is written first: ``wheels/accel-constraints.txt`` plus the locked versions.
    """
    lines = (wheels / "accel-constraints.txt").read_text().split() + locked_constraints()
    constraints.write_text("\n".join(lines) + "\n")
    shutil.rmtree(venv, ignore_errors=True)
    run("uv", "venv", "--quiet", "--python", sys.executable, venv, timeout=300)
    python = venv / "bin" / "python"
    install = ["uv", "pip", "install", "--quiet", "--python", python]
    install += ["--find-links", wheels, "--constraint", constraints]
    run(*install, "accelerate", *requirements, timeout=900)
    return python


def clean_env(home: Path) -> dict[str, str]:
    """os.environ without the workspace's venv, accel/launcher variables; HF offline, private home."""
    drop = ("ACCEL_", "ACCELERATE_", "PET_", "TORCHELASTIC_")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(drop)
        and k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "UV_PROJECT_ENVIRONMENT")
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(
        HF_HOME=str(home / "hf"),
        HF_HUB_OFFLINE="1",
        ACCEL_CONFIG_DIR=str(home / "accel-config"),
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def main() -> int:
    """Build, install, check; 1 on the first failure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", default=None, help="work here and keep the venv and wheels")
    parser.add_argument("--no-launch", action="store_true", help="skip the 2-process launch")
    args = parser.parse_args()
    root = Path(args.keep or tempfile.mkdtemp(prefix="accel-compat-install-"))
    root.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    steps: dict[str, float] = {}

    def step(name: str, t: float) -> None:
        steps[name] = round(time.monotonic() - t, 1)
        print(f"{name}: {steps[name]} s", flush=True)

    try:
        t = time.monotonic()
        wheels = root / "wheels"
        shutil.rmtree(wheels, ignore_errors=True)
        wheels.mkdir()
        versions = build_wheels(wheels)
        step(f"built {len(versions)} wheels", t)

        t = time.monotonic()
        python = install_venv(root / "venv", wheels, root / "constraints.txt", LIBRARIES)
        step("installed accelerate, " + ", ".join(LIBRARIES), t)

        t = time.monotonic()
        install = ["uv", "pip", "install", "--quiet", "--python", python, "--find-links", wheels]
        install += ["--constraint", root / "constraints.txt"]
        run(*install, "--upgrade", "accelerate", "transformers", timeout=900)
        step("upgrade kept by the constraint", t)

        t = time.monotonic()
        home = root / "home"
        home.mkdir(exist_ok=True)
        env = clean_env(home)
        result = subprocess.run(
            [str(python), "-c", CHECK, str(HF_STACK)],
            capture_output=True, text=True, env=env, cwd=home, timeout=600,
        )  # fmt: skip
        if result.returncode != 0:
            print(result.stdout[-3000:], result.stderr[-6000:], sep="\n")
            print("the check in the venv failed", file=sys.stderr)
            return 1
        info = json.loads(result.stdout.strip().splitlines()[-1])
        step("imports and Trainer in the venv", t)

        if not args.no_launch:
            t = time.monotonic()
            out = root / "launch"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            launch = [
                str(python.with_name("accelerate")),
                "launch",
                "--cpu",
                "--num_processes",
                "2",
            ]
            launch += [str(HF_STACK / "workers" / "trainer_worker.py"), str(out)]
            result = subprocess.run(
                launch, capture_output=True, text=True, env=env, cwd=home, timeout=600
            )
            if result.returncode != 0:
                print(result.stdout[-3000:], result.stderr[-6000:], sep="\n")
                print("accelerate launch on 2 processes failed", file=sys.stderr)
                return 1
            launched = json.loads((out / "result.json").read_text())
            info["launch"] = {
                k: launched[k]
                for k in ("accelerator", "num_processes", "distributed_type", "steps")
            }
            step("accelerate launch, Trainer on 2 processes", t)
        info["expected"] = versions
        info["steps_s"] = steps
        info["total_s"] = round(time.monotonic() - start, 1)
        print(json.dumps(info))
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
