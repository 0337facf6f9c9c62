"""Reference numbers from the real Accelerate: run tools/reference_scripts/ in a venv of their own.

    uv run python tools/accelerate_reference.py                  # every reference
    uv run python tools/accelerate_reference.py --only loader_orders_2proc
    uv run python tools/accelerate_reference.py --list

The workspace cannot hold Accelerate (its ``accelerate`` distribution is accel's compat
package), so this creates, or reuses, a venv outside it, ``.cache/accelerate-reference/venv``
(git-ignored), with ``uv venv`` and ``uv pip install accelerate==ACCELERATE_VERSION
torch==<the workspace's torch>`` plus what each reference needs (uv's cache makes torch cheap).
Each reference runs a script of tools/reference_scripts/ there (one process: ``python``; more:
``accelerate launch --multi_gpu --num_processes N``: torchrun, gloo on a machine
without GPUs) and the script writes
``integration-tests/reference/accelerate-<major.minor>/cpu-<capability>/<name>.json``; those
files are committed. The last bits of float results depend on the CPU kernels torch picks
(``torch.backends.cpu.get_cpu_capability()``: AVX2 and AVX-512 sum in other orders), so each
capability has its own folder; a reference without a file for this machine's capability is the
one in ``accelerate-<major.minor>/`` itself, written before the capability was recorded.
integration-tests/reference/test_accelerate_numbers.py runs the same scripts under accel
(``accel launch``) and asserts the same numbers.

Adding a reference (e.g. a transformers Trainer run):
1. write ``tools/reference_scripts/<script>.py``: it imports ``accelerate`` (never ``accel``),
   takes ``--output PATH`` (and ``--case NAME``), and writes its JSON with
   ``_common.run_cases`` (one entry per process; only ``ranks`` is compared);
2. add a :class:`Reference` to :data:`REFERENCES`, with the pip requirements it needs beyond
   accelerate and torch (``requirements=("transformers==4.57.1",)``); the test picks it up;
3. ``uv run python tools/accelerate_reference.py --only <name>`` and commit the JSON.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "tools" / "reference_scripts"
ACCELERATE_VERSION = "1.15.0"
OUTPUT = ROOT / "integration-tests" / "reference" / "accelerate-1.15"
VENV = ROOT / ".cache" / "accelerate-reference" / "venv"


@dataclass(frozen=True)
class Reference:
    """One reference run: a script of tools/reference_scripts/ on some processes, one JSON file."""

    name: str
    """``--only`` name; the output is ``<name>.json``."""
    script: str
    """File name under tools/reference_scripts/."""
    num_processes: int = 1
    """1: ``python script``; more: ``accelerate launch --multi_gpu --num_processes N script``."""
    args: tuple[str, ...] = ()
    """Extra arguments for the script."""
    requirements: tuple[str, ...] = ()
    """pip requirements beyond accelerate and torch (installed into the reference venv)."""
    timeout: float = 600
    """Seconds one run may take."""

    @property
    def output(self) -> Path:
        """The committed JSON for this machine: its CPU capability's, else the unrecorded one."""
        specific = capability_folder() / f"{self.name}.json"
        return specific if specific.exists() else OUTPUT / f"{self.name}.json"


def capability_folder() -> Path:
    """Where this machine's references live: ``cpu-<torch's CPU capability>`` (e.g. ``cpu-avx2``)."""
    import torch

    return OUTPUT / f"cpu-{torch.backends.cpu.get_cpu_capability().lower()}"


TRAINER_REQUIREMENTS = ("transformers==5.24.0", "datasets==5.2.0")
"""The versions in uv.lock: a Trainer reference compares like with like."""

REFERENCES: tuple[Reference, ...] = (
    Reference("loader_orders", "loader_orders.py"),
    Reference("loader_orders_2proc", "loader_orders.py", num_processes=2),
    Reference("train_dropout", "train_dropout.py"),
    Reference("train_dropout_2proc", "train_dropout.py", num_processes=2),
    Reference("trainer_gpt2", "trainer_gpt2.py", requirements=TRAINER_REQUIREMENTS),
    Reference(
        "trainer_gpt2_2proc", "trainer_gpt2.py", num_processes=2, requirements=TRAINER_REQUIREMENTS
    ),
    Reference(
        "trainer_iterable_eval", "trainer_iterable_eval.py", requirements=TRAINER_REQUIREMENTS
    ),
    Reference(
        "trainer_iterable_eval_2proc",
        "trainer_iterable_eval.py",
        num_processes=2,
        requirements=TRAINER_REQUIREMENTS,
    ),
    Reference(
        "trainer_fsdp_2proc",
        "trainer_fsdp.py",
        num_processes=2,
        requirements=TRAINER_REQUIREMENTS,
    ),
    Reference("cross_validation", "cross_validation.py", requirements=TRAINER_REQUIREMENTS),
    Reference(
        "cross_validation_2proc",
        "cross_validation.py",
        num_processes=2,
        requirements=TRAINER_REQUIREMENTS,
    ),
)
"""Every reference, in the order they run. Add new ones here (see the module docstring)."""


def by_name(names: Sequence[str]) -> list[Reference]:
    """The references called ``names`` (all of them for an empty list); SystemExit on an unknown one."""
    known = {ref.name: ref for ref in REFERENCES}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown reference(s) {unknown}; known: {', '.join(known)}")
    return [known[n] for n in names] if names else list(REFERENCES)


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(
    ref: Reference,
    python: str | Path,
    launcher: str | Path,
    output: Path,
    *extra: str,
    always_launch: bool = False,
) -> list[str]:
    """The argv that runs ``ref`` writing ``output``: ``python script`` or ``<launcher> launch ...``.

    ``launcher`` is the ``accelerate`` executable of the reference venv, or ``accel`` (the
    test runs the same scripts under accel this way, through ``accel launch`` also on one
    process: ``always_launch``).
    """
    script = [str(SCRIPTS / ref.script), "--output", str(output), *ref.args, *extra]
    if ref.num_processes == 1 and not always_launch:
        return [str(python), *script]
    launch = [str(launcher), "launch", "--num_processes", str(ref.num_processes)]
    launch += ["--num_machines", "1", "--main_process_port", str(free_port())]
    if Path(launcher).name == "accelerate":
        # Accelerate's `--cpu` takes the simple launcher (one process, or mpirun with a
        # hostfile); `--multi_gpu` is its torchrun launcher, which on a machine without
        # GPUs (and with the scripts' Accelerator(cpu=True)) gives MULTI_CPU over gloo.
        launch += ["--multi_gpu", "--mixed_precision", "no", "--dynamo_backend", "no"]
    else:
        launch += ["--cpu"]
    return [*launch, *script]


def clean_env(home: Path) -> dict[str, str]:
    """os.environ without accel / Accelerate / torchrun variables, a private HF_HOME (no user config)."""
    drop = ("ACCEL_", "ACCELERATE_", "PET_", "TORCHELASTIC_")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(drop)
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
        and k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    env.update(
        HF_HOME=str(home),
        ACCEL_CONFIG_DIR=str(home / "accel"),
        HF_HUB_OFFLINE="1",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def run(argv: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """Run ``argv`` in a process group of its own; on timeout kill the group and raise."""
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=env["HF_HOME"],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise TimeoutError(
            f"{' '.join(argv)} timed out after {timeout} s\n{stdout[-4000:]}\n{stderr[-4000:]}"
        ) from None
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def venv_python(venv: Path) -> Path:
    """The venv's interpreter."""
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_venv(venv: Path, requirements: Sequence[str]) -> Path:
    """Create ``venv`` if needed and install ``requirements`` into it (a no-op when satisfied)."""
    uv = shutil.which("uv")
    if uv is None:
        raise SystemExit("uv is needed to build the reference venv: pip install uv")
    python = venv_python(venv)
    if not python.exists():
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        subprocess.run([uv, "venv", "--quiet", "--python", version, str(venv)], check=True)
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(python), *requirements], check=True
    )
    return python


def requirements_for(refs: Sequence[Reference]) -> list[str]:
    """accelerate at the reference version, the workspace's torch, and what the references add."""
    torch_version = importlib.metadata.version("torch")
    wanted = [f"accelerate=={ACCELERATE_VERSION}", f"torch=={torch_version}", "numpy"]
    for ref in refs:
        wanted += [r for r in ref.requirements if r not in wanted]
    return wanted


def main() -> int:
    """Build or reuse the reference venv, run the chosen references, write their JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this reference (repeatable, or comma-separated)",
    )
    parser.add_argument("--list", action="store_true", help="list the references and exit")
    parser.add_argument("--venv", type=Path, default=VENV, help=f"default: {VENV}")
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=None,
        help="write the JSON here instead of this CPU capability's folder",
    )
    args = parser.parse_args()
    if args.list:
        for ref in REFERENCES:
            print(f"{ref.name:24} {ref.script} on {ref.num_processes} process(es)")
        return 0
    refs = by_name([n for item in args.only for n in item.split(",") if n])
    python = ensure_venv(args.venv, requirements_for(refs))
    launcher = python.with_name("accelerate")
    args.output_dir = args.output_dir or capability_folder()
    args.output_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    for ref in refs:
        with tempfile.TemporaryDirectory(prefix="accelerate-reference-") as home:
            output = args.output_dir / f"{ref.name}.json"
            start = time.monotonic()
            argv = command(ref, python, launcher, output)
            result = run(argv, clean_env(Path(home)), ref.timeout)
            took = time.monotonic() - start
            if result.returncode != 0:
                failed += 1
                print(f"FAILED {ref.name} ({took:.0f} s): {' '.join(argv)}")
                print(result.stdout[-3000:], result.stderr[-6000:], sep="\n")
                continue
            ran = json.loads(output.read_text())["num_processes"]
            if ran != ref.num_processes:
                failed += 1
                print(f"FAILED {ref.name}: ran on {ran} process(es), not {ref.num_processes}")
                continue
            print(f"wrote {output.relative_to(ROOT) if output.is_relative_to(ROOT) else output}"
                  f" ({took:.0f} s)")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
