"""transformers' ``Trainer`` on 2 real processes (gloo): through ``accel launch`` and plain
``torchrun``, with the same numbers; ``accel launch --mixed_precision bf16`` trains it in bf16."""

from __future__ import annotations

import json
from pathlib import Path

import accelerate  # noqa: E402, F401  (the workspace always has the compat distribution: never a skip)
import pytest

pytest.importorskip("transformers")

from accel.testing.processes import accel_executable, clean_environment, run_command  # noqa: E402

WORKER = Path(__file__).parent / "workers" / "trainer_worker.py"


def _launch(out: Path, *flags: str) -> dict:
    command = [accel_executable(), "launch", "--cpu", *flags, str(WORKER), str(out)]
    run_command(command, env=clean_environment({"HF_HUB_OFFLINE": "1"}), timeout=400)
    return json.loads((out / "result.json").read_text())


def _torchrun(out: Path) -> dict:
    from accel.testing.processes import torchrun_command

    command = torchrun_command(WORKER, [str(out)], 2)
    env = clean_environment({"HF_HUB_OFFLINE": "1"})
    env.pop("ACCEL_USE_CPU")
    run_command(command, env=env, timeout=400)
    return json.loads((out / "result.json").read_text())


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    return _launch(tmp_path_factory.mktemp("accel"), "--num_processes", "2")


def test_two_processes_through_accel_launch(launched):
    assert launched["accelerator"] == "accelerate.compat_accelerator.Accelerator"
    assert launched["num_processes"] == 2
    assert launched["distributed_type"] == "MULTI_CPU"
    assert launched["steps"] == 12  # 48 rows / (2 per process x 2 processes x 2 accumulated) x 2
    assert launched["losses"][-1][0] < launched["losses"][0][0]
    assert len(launched["eval_losses"]) == 2


def test_torchrun_gives_the_same_numbers(launched, tmp_path):
    plain = _torchrun(tmp_path)
    assert plain["num_processes"] == 2
    assert plain["losses"] == launched["losses"]
    assert plain["checksum"] == launched["checksum"]


def test_accel_launch_mixed_precision_reaches_the_trainer(tmp_path):
    result = _launch(tmp_path, "--num_processes", "1", "--mixed_precision", "bf16")
    assert result["args_mixed_precision"] == "bf16"
    assert result["mixed_precision"] == "bf16"
