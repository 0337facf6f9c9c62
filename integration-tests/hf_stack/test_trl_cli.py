"""``trl sft ...`` launches through the compat distribution's ``accelerate.commands.launch``
onto accel's launcher (2 gloo processes), on a local tiny model and dataset."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import accelerate  # noqa: E402, F401  (the workspace always has the compat distribution: never a skip)

pytest.importorskip("trl")
import tiny  # noqa: E402
from accel.testing.processes import clean_environment, run_command  # noqa: E402


def test_trl_sft_cli_launches_on_accel(tmp_path):
    trl = shutil.which("trl", path=str(Path(sys.executable).parent))
    if trl is None:
        pytest.skip("the trl command is not installed")
    model, data, out = tmp_path / "model", tmp_path / "data", tmp_path / "out"
    tiny.gpt2().save_pretrained(model)
    tiny.tokenizer().save_pretrained(model)
    tiny.text_dataset(rows=16).to_json(str(data / "train.jsonl"))
    command = [
        trl,
        "sft",
        "--model_name_or_path", str(model),
        "--dataset_name", str(data),
        "--output_dir", str(out),
        "--max_steps", "3",
        "--per_device_train_batch_size", "2",
        "--max_length", "16",
        "--report_to", "none",
        "--save_strategy", "no",
        "--use_cpu",
        "--num_processes", "2",  # not the script's: trl passes it to `accelerate launch`
    ]  # fmt: skip
    result = run_command(command, env=clean_environment({"HF_HUB_OFFLINE": "1"}), timeout=600)
    assert "accel launch: 1 machine x 2 processes" in result.stderr, result.stderr[-3000:]
    assert (out / "model.safetensors").is_file()
