"""The import structure of every package: no circles, core's layers respected, no private reads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_check_imports_finds_no_problem():
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools/check_imports.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 problem(s)" in result.stderr


def test_check_imports_reports_a_circle_a_private_read_and_an_alias_import(tmp_path):
    """The checker itself fails on what it must catch (run on a copy of the tree with four defects)."""
    import shutil

    copy = tmp_path / "repo"
    (copy / "tools").mkdir(parents=True)
    shutil.copy(ROOT / "tools/check_imports.py", copy / "tools/check_imports.py")
    # .venv: accel-tpu keeps its XLA environment (.ci/after.d) inside the package
    shutil.copytree(
        ROOT / "packages",
        copy / "packages",
        ignore=shutil.ignore_patterns("tests", "__pycache__", ".venv"),
    )
    state = copy / "packages/accel-core/src/accel/env_vars.py"
    state.write_text(state.read_text() + "\nfrom accel import accelerator  # noqa\n")
    ddp = copy / "packages/accel-ddp/src/accel_ddp/plugin.py"
    ddp.write_text(ddp.read_text() + "\n\ndef _peek(acc):\n    return acc._models\n")
    context = copy / "packages/accel-core/src/accel/backends/context.py"
    hint = "\nif TYPE_CHECKING:\n    from accel.accelerator import Accelerator  # noqa\n"
    context.write_text(context.read_text() + hint)  # a type hint only: still upward
    kwargs = copy / "packages/accel-ddp/src/accel_ddp/kwargs.py"
    kwargs.write_text(kwargs.read_text() + "\nfrom accel.utils.operations import gather  # noqa\n")
    result = subprocess.run(
        [sys.executable, str(copy / "tools/check_imports.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "accel.env_vars (layer 0) imports accel.accelerator" in result.stdout
    assert "accel.backends.context (layer 13) imports accel.accelerator" in result.stdout
    assert "touches core's private _models" in result.stdout
    assert "kwargs.py:" in result.stdout
    assert "imports accel.utils.operations, an Accelerate alias path" in result.stdout


def test_checkpoint_code_importing_backends_or_big_model_is_upward_even_inside_a_function(tmp_path):
    """accel.checkpoint sits below backends and big-model code: an import of either, at module
    level, under TYPE_CHECKING or inside a function, is reported."""
    import shutil

    copy = tmp_path / "repo"
    (copy / "tools").mkdir(parents=True)
    shutil.copy(ROOT / "tools/check_imports.py", copy / "tools/check_imports.py")
    shutil.copytree(
        ROOT / "packages",
        copy / "packages",
        ignore=shutil.ignore_patterns("tests", "__pycache__", ".venv"),
    )
    manager = copy / "packages/accel-core/src/accel/checkpoint/manager.py"
    manager.write_text(
        manager.read_text()
        + "\n\ndef _offloaded(model):\n"
        + "    from accel.big_model.hooks import has_offloaded_params  # noqa\n\n"
        + "    return has_offloaded_params(model)\n"
        + "\nif TYPE_CHECKING:\n    from accel.backends.base import Backend  # noqa\n"
    )
    result = subprocess.run(
        [sys.executable, str(copy / "tools/check_imports.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "accel.checkpoint.manager (layer 10) imports accel.big_model.hooks" in result.stdout
    assert "accel.checkpoint.manager (layer 10) imports accel.backends.base" in result.stdout
