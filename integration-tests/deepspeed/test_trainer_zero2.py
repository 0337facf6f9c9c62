"""transformers' Trainer with DeepSpeed ZeRO-2 on accel, 2 real gloo processes through ``accel launch``.

``TrainingArguments(deepspeed=<dict with "auto" values>)`` on a tiny randomly initialised
GPT-2 built locally (nothing from the Hub): the Trainer fills the "auto" values, accel
builds the engine from that very config, trains, checkpoints (DeepSpeed's
``global_step*`` folder and model.safetensors), resumes; the same with DeepSpeed chosen by
``accel launch --use_deepspeed`` instead of ``TrainingArguments(deepspeed=...)``; the worker checks the losses,
step 1's gradient norm against a one-process reference (so the loss is scaled for
gradient accumulation exactly once) and that both ranks hold the same weights.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("deepspeed")
from accel.testing.processes import accel_executable, clean_environment, run_command  # noqa: E402

HERE = Path(__file__).parent
REPO = HERE.parents[1]
pytestmark = pytest.mark.skipif(
    shutil.which(os.environ.get("CXX", "c++")) is None,
    reason=(
        "DeepSpeed JIT-builds its CPU communication op (shm_comm) with a C++ compiler: "
        "apt-get install g++ (see .ci/setup.d/deepspeed.sh)"
    ),
)


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "where",
    [
        # TrainingArguments(deepspeed=<dict>): the Trainer's HfTrainerDeepSpeedConfig feeds the plugin
        "training_arguments",
        # accel launch --use_deepspeed --zero_stage 2 (ACCELERATE_USE_DEEPSPEED): the launched
        # plugin, its "auto" values filled by the Trainer; torch AdamW and the Trainer's scheduler
        "launcher",
    ],
)
def test_trainer_zero2_with_auto_config_on_two_processes(tmp_path, where):
    accel = accel_executable()
    if accel is None:
        pytest.skip("the accel command (accel-cli) is not installed")
    env = clean_environment(
        {
            "DS_ACCELERATOR": "cpu",
            "TORCH_EXTENSIONS_DIR": os.environ.get(
                "TORCH_EXTENSIONS_DIR", str(REPO / ".cache" / "torch_extensions")
            ),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_HOME": str(tmp_path / "hf_home"),
        }
    )
    done = run_command(
        [
            accel,
            "launch",
            "--cpu",
            "--num_processes",
            "2",
            "--mixed_precision",
            "no",
            *(["--use_deepspeed", "--zero_stage", "2"] if where == "launcher" else []),
            str(HERE / "workers" / "trainer_zero2.py"),
            str(tmp_path / "out"),
            *(["--from-launcher"] if where == "launcher" else []),
        ],
        env=env,
        timeout=840,
    )
    for rank in (0, 1):
        for check in ("auto-filled", "loss", "grad norm", "same weights", "resume"):
            assert f"rank{rank} ok {check}" in done.stdout, done.stdout[-3000:]
    assert "rank0 ok checkpoint" in done.stdout and "rank0 ok save_model" in done.stdout
    assert (tmp_path / "out" / "checkpoint-4" / "global_step4").is_dir()
