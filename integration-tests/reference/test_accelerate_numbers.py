"""Same seed, same numbers as Accelerate 1.15, on real processes (gloo), through `accel launch`.

Every reference of tools/accelerate_reference.py (its ``REFERENCES``) runs here under accel:
the same script, the same number of processes, launched with ``accel launch --cpu``; each
process's record of each case must equal the committed JSON that the real Accelerate wrote
on a CPU of the same capability (accelerate-1.15/cpu-<capability>/<name>.json, else
accelerate-1.15/<name>.json: see tools/accelerate_reference.py). A reference added to the registry is tested here as soon as
its JSON is committed. Then accel's own addition: a run stopped with ``save_state`` inside an
epoch and resumed with ``load_state`` in new processes goes on with Accelerate's
uninterrupted losses.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ACCEL = Path(sys.executable).with_name("accel")


def _tool():
    spec = importlib.util.spec_from_file_location(
        "_accelerate_reference", ROOT / "tools" / "accelerate_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


TOOL = _tool()
COMMITTED = [ref for ref in TOOL.REFERENCES if ref.output.exists()]


def _run(ref, tmp_path: Path, *extra: str) -> dict:
    """Run ``ref``'s script under accel (``accel launch``) and return the JSON it wrote."""
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    output = tmp_path / f"{ref.name}.json"
    argv = TOOL.command(ref, sys.executable, ACCEL, output, *extra, always_launch=True)
    result = TOOL.run(argv, TOOL.clean_env(home), timeout=ref.timeout)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    return json.loads(output.read_text())


def test_every_reference_has_its_json():
    """Regenerate with: uv run python tools/accelerate_reference.py --only NAME."""
    missing = [ref.name for ref in TOOL.REFERENCES if not ref.output.exists()]
    assert not missing


@pytest.mark.timeout(660)
@pytest.mark.parametrize("ref", COMMITTED, ids=lambda ref: ref.name)
def test_accel_gives_accelerates_numbers(ref, tmp_path):
    expected = json.loads(ref.output.read_text())
    assert expected["versions"]["accelerate"] == TOOL.ACCELERATE_VERSION
    got = _run(ref, tmp_path)
    assert got["num_processes"] == expected["num_processes"] == ref.num_processes
    for rank, (mine, theirs) in enumerate(zip(got["ranks"], expected["ranks"], strict=True)):
        assert sorted(mine) == sorted(theirs)
        different = [case for case in theirs if mine[case] != theirs[case]]
        assert not different, f"rank {rank}: {different} differ from Accelerate's\n" + "\n".join(
            f"{case}:\n accel      {mine[case]}\n Accelerate {theirs[case]}" for case in different
        )


@pytest.mark.timeout(660)
def test_two_process_mid_epoch_resume_goes_on_with_accelerates_losses(tmp_path):
    """save_state after 7 steps (inside epoch 1: 5 batches a process an epoch), load_state in new
    processes: every process's remaining losses are those of Accelerate's uninterrupted run."""
    (ref,) = [r for r in TOOL.REFERENCES if r.name == "train_dropout_2proc"]
    checkpoint = tmp_path / "ckpt"
    step = 7
    first = _run(ref, tmp_path / "first", "--save-at", str(step), "--checkpoint", str(checkpoint))
    rest = _run(ref, tmp_path / "rest", "--resume", str(checkpoint))
    expected = json.loads(ref.output.read_text())
    for rank in range(2):
        for case, record in expected["ranks"][rank].items():
            losses = record["losses"]
            assert first["ranks"][rank][case]["losses"] == losses[:step], (rank, case)
            assert rest["ranks"][rank][case]["losses"] == losses[step:], (rank, case)
            assert rest["ranks"][rank][case]["rng"] == record["rng"][1:], (rank, case)
