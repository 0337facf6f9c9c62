"""docs/hf-libraries.md's install, from built wheels into a clean venv: transformers, PEFT and
TRL resolve against accel's ``accelerate``, no real Accelerate comes along, ``Trainer`` trains,
and ``accelerate launch`` runs it on 2 processes (the compat distribution brings accel-ddp).

tools/check_compat_install.py does the work (2-3 minutes on 2 cores, most of it the venv's
first imports and the 2-process launch); third-party wheels come from uv's cache at the
versions of uv.lock (the index only when the cache lacks them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "check_compat_install.py"

pytestmark = pytest.mark.timeout(900)  # the tool's own limit; it takes 2-3 minutes on 2 busy cores


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    work = tmp_path_factory.mktemp("compat-install")
    result = subprocess.run(
        [sys.executable, str(TOOL), "--keep", str(work)],
        capture_output=True,
        text=True,
        timeout=900,
        env={k: v for k, v in os.environ.items() if not k.startswith(("ACCEL_", "ACCELERATE_"))},
    )
    assert result.returncode == 0, f"{result.stdout[-4000:]}\n{result.stderr[-6000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_venv_has_accels_build_and_no_real_accelerate(installed):
    expected = installed["expected"]
    assert installed["version"] == installed["__version__"] == expected["accelerate"]
    assert installed["accelerate_dists"] == 1
    assert any(r.startswith("accel-core") for r in installed["requires"])
    assert installed["in_venv"] and installed["alias"] and installed["accels_accelerator"]
    assert set(installed["accel_dists"]) == set(expected) - {"accelerate"}
    assert {"accel-core", "accel-cli", "accel-ddp"} <= set(installed["accel_dists"])


def test_transformers_peft_trl_at_the_locked_versions(installed):
    from importlib.metadata import version

    assert installed["libraries"] == {name: version(name) for name in installed["libraries"]}


def test_trainer_runs_on_accel(installed):
    # accelerate.Accelerator: accel's, with Accelerate's rules where they differ
    assert installed["trainer_accelerator"] == "accelerate.compat_accelerator"
    assert installed["trainer_on_accel"]
    assert installed["trainer_steps"] == 2


def test_accelerate_launch_runs_trainer_on_two_processes(installed):
    assert installed["launch"] == {
        "accelerator": "accelerate.compat_accelerator.Accelerator",
        "num_processes": 2,
        "distributed_type": "MULTI_CPU",
        "steps": 12,
    }
