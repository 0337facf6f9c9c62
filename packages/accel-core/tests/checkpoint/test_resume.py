"""Resume bit-exactness: 0->N equals 0->k, save_state, fresh process load_state, k->N.

The job (scripts/resume_train.py) trains a small MLP with dropout on a shuffled
DataLoader (40 samples, batch 4: 10 steps per epoch, 3 epochs) with Adam and
StepLR. Run A trains straight through; run B saves checkpoints at several steps;
each run C is a fresh process that loads one checkpoint and finishes the job.
All processes run concurrently (the interpreter start-up dominates).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).parent / "scripts" / "resume_train.py"
STEPS_PER_EPOCH = 10
TOTAL_STEPS = 30

pytestmark = pytest.mark.timeout(540)  # generous: CI machines are shared; ~35 s when idle

# name: (checkpoint, mode, steps already done)
# Each process costs ~10 s of CPU (torch and torch._dynamo, which every optimizer imports), so
# the variants are few; the between-epochs and Accelerate-style end-of-epoch cases are checked
# in-process in test_dataloader_position.py.
VARIANTS = {
    "mid_epoch": ("step_13", "resume", 13),
    "end_of_epoch": ("step_10", "resume", 10),
    "mid_epoch_skip_first_batches": ("step_13", "resume-skip", 13),
}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0")
    return env


def _run_all(commands: dict[str, list[str]], cwd: Path) -> dict[str, subprocess.CompletedProcess]:
    procs = {
        name: subprocess.Popen(
            [sys.executable, str(SCRIPT), *args],
            cwd=cwd,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, args in commands.items()
    }
    results = {}
    try:
        for name, proc in procs.items():
            out, _ = proc.communicate(timeout=400)
            results[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    ckpts = root / "ckpts"
    first = _run_all(
        {
            "A": ["full", str(root / "A.pt")],
            "B": ["save", str(ckpts), "10,13"],
        },
        root,
    )
    for name, result in first.items():
        assert result.returncode == 0, f"run {name} failed:\n{result.stdout}"
    second = _run_all(
        {
            name: [mode, str(ckpts / ckpt), str(root / f"C_{name}.pt")]
            for name, (ckpt, mode, _) in VARIANTS.items()
        },
        root,
    )
    return root, ckpts, second


def _load(path: Path) -> tuple[dict, list[int]]:
    result = torch.load(path, weights_only=True)
    seen = json.loads(Path(str(path) + ".json").read_text())["seen"]
    return result, seen


def _assert_bit_exact(runs, name: str) -> None:
    root, _, results = runs
    assert results[name].returncode == 0, f"run C ({name}) failed:\n{results[name].stdout}"
    a, a_seen = _load(root / "A.pt")
    c, c_seen = _load(root / f"C_{name}.pt")
    done = VARIANTS[name][2]
    assert len(a_seen) == TOTAL_STEPS * 4
    # the resumed run sees exactly the samples the uninterrupted one saw after step k
    assert c_seen == a_seen[done * 4 :]
    assert a["model"].keys() == c["model"].keys()
    for key in a["model"]:
        assert torch.equal(a["model"][key], c["model"][key]), f"{key} differs after resume"
    assert a["lr"] == c["lr"]
    for pid, state in a["optimizer"]["state"].items():
        for k, v in state.items():
            assert torch.equal(v, c["optimizer"]["state"][pid][k]), f"optimizer {pid}.{k} differs"
    assert torch.equal(a["rng"], c["rng"])  # dropout consumed the same random numbers


def test_checkpoints_were_written(runs):
    _, ckpts, _ = runs
    for name in ("step_10", "step_13"):
        folder = ckpts / name
        assert (folder / "model.safetensors").is_file()
        assert (folder / "optimizer.bin").is_file()
        assert (folder / "scheduler.bin").is_file()
        assert (folder / "dl_state_dict.bin").is_file()
        assert (folder / "random_states_0.pkl").is_file()
    position = torch.load(ckpts / "step_13" / "dl_state_dict.bin", weights_only=True)
    assert position["epoch"] == 1 and position["batches_yielded"] == 3
    assert not list(ckpts.glob("*accel-tmp*")), "a temporary checkpoint directory was left behind"


def test_resume_mid_epoch_is_bit_exact(runs):
    _assert_bit_exact(runs, "mid_epoch")


def test_resume_at_end_of_epoch_is_bit_exact(runs):
    # saved inside the loop right after the last batch of epoch 0
    _assert_bit_exact(runs, "end_of_epoch")


def test_resume_with_skip_first_batches_is_bit_exact(runs):
    _assert_bit_exact(runs, "mid_epoch_skip_first_batches")
