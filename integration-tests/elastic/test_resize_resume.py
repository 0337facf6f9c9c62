"""Resume on another number of processes through `accel launch` (real gloo processes, DDP and FSDP2).

Each case saves after 3 optimizer steps on N processes and goes on to the end of the epoch
(the uninterrupted run); the same script resumed on M processes from that checkpoint must see
every sample of the epoch exactly once across the resize and end with the uninterrupted
run's weights, learning rate and number of updates (keep_global_batch_size: the same global
batches, also when the per-process batch size changes too), up to the order of
floating-point reductions; bit-identical when the size does not change. The saves record
their fsync calls: every process syncs the checkpoint's files and folders before the
manifest is written.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from accel.testing.processes import accel_executable, clean_environment, run_command

WORKER = Path(__file__).parent / "workers" / "resize_train.py"
pytestmark = pytest.mark.timeout(900)


def launch(tmp_path: Path, nproc: int, *args: object, env=None):
    """``accel launch --cpu --num_processes nproc`` of the worker; its exit code is the caller's to check."""
    command = [accel_executable(), "launch", "--cpu", "--num_processes", str(nproc), str(WORKER)]
    extra = {"ACCEL_CONFIG_DIR": str(tmp_path / "cfg"), "ACCEL_PLUGINS": "ddp,fsdp", **(env or {})}
    return run_command(
        [*command, *map(str, args)], env=clean_environment(extra), timeout=300, check=False
    )


def records(folder: Path, mode: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob(f"{mode}-rank*.json"))]


CASES = {  # processes, per-process batch: saved, resumed; options
    "2x4to1x8-shuffled-accumulating": ((2, 4), (1, 8), ["--shuffle", "--accumulation", "2"]),
    "1x8to2x4-accumulating": ((1, 8), (2, 4), ["--accumulation", "2"]),
    "2to4-shuffled-accumulating": ((2, 4), (4, 4), ["--shuffle", "--accumulation", "2"]),
}


@pytest.mark.parametrize("backend", ["ddp", "fsdp"])
@pytest.mark.parametrize("case", list(CASES))
def test_resize_keeps_the_epoch_and_the_trajectory(tmp_path, case, backend):
    (saved_on, saved_batch), (resumed_on, batch), options = CASES[case]
    options = [*options, "--keep"] + (["--fsdp"] if backend == "fsdp" else [])
    saved = launch(
        tmp_path, saved_on, tmp_path, "save", 3, *options, "--batch", saved_batch, "--record-fsync"
    )
    assert saved.returncode == 0, saved.stderr[-5000:]
    before = records(tmp_path, "save")
    _check_fsync_order(tmp_path / "project" / "checkpoints", before)
    if case.startswith("2x4to1x8") and backend == "ddp":
        _check_another_length_is_refused(tmp_path, options)
    resumed = launch(tmp_path, resumed_on, tmp_path, "resume", 0, *options, "--batch", batch)
    assert resumed.returncode == 0, resumed.stderr[-5000:]
    line = f"checkpoint written by {saved_on} processes, resumed on {resumed_on}"
    assert line in resumed.stderr
    after = records(tmp_path, "resume")
    assert len(before) == saved_on and len(after) == resumed_on
    seen = [i for r in before for i in r["seen_at_save"]] + [i for r in after for i in r["seen"]]
    assert sorted(seen) == list(range(96))  # every sample of the epoch exactly once
    # samples per optimizer step kept: N x G x B_saved / (M x B_now), not N x G / M
    accumulation = saved_on * before[0]["accumulation"] * saved_batch // (resumed_on * batch)
    assert f"gradient accumulation steps now {accumulation}" in resumed.stderr
    assert all(r["accumulation"] == accumulation for r in after)
    uninterrupted, continued = before[0], after[0]
    assert 3 + continued["updates"] == uninterrupted["updates"]
    assert continued["lr"] == pytest.approx(uninterrupted["lr"], rel=1e-12)
    for name, values in uninterrupted["weights"].items():
        assert continued["weights"][name] == pytest.approx(values, abs=1e-5), name


def _check_fsync_order(root: Path, ranks: list[dict]) -> None:
    """On every rank, the checkpoint's files and folders are fsynced before the manifest is
    written; the manifest's folder after it, and the parent folder after the rename."""
    (final,) = root.iterdir()
    tmp = f"{final}.accel-tmp"
    files = {
        os.path.join(tmp, os.path.relpath(os.path.join(folder, name), final))
        for folder, _, names in os.walk(final)
        for name in names
        if name != "accel_manifest.json"
    }
    main = ranks[0]["fsyncs"]
    (manifest_at,) = [t for t, path in main if path == f"{tmp}/accel_manifest.json.tmp"]
    synced_before = set()
    for rank, record in enumerate(ranks):
        before = {path for t, path in record["fsyncs"] if t < manifest_at}
        assert tmp in before, (rank, sorted(before))  # the checkpoint's folder
        assert f"{tmp}/random_states_{rank}.pkl" in before, (rank, sorted(before))
        synced_before |= before
    assert files <= synced_before, sorted(files - synced_before)
    after = [path for t, path in main if t > manifest_at]
    assert after[-2:] == [tmp, str(root)], after  # the manifest's entry; the renamed folder's


def _check_another_length_is_refused(tmp_path: Path, options: list[str]) -> None:
    """Mid-epoch, a dataset of 112 samples cannot continue a position counted over 96."""
    refused = launch(tmp_path, 1, tmp_path, "resume", 0, *options, "--samples", 112)
    assert refused.returncode == 2, refused.stderr[-5000:]
    assert "Traceback" not in refused.stderr
    (line,) = [line for line in refused.stderr.splitlines() if "error" in line]
    assert line.startswith("accel launch: error: this data loader's position was counted over 96")
    assert "this loader has 112" in line


def test_same_size_resume_is_bit_identical(tmp_path):
    options = ["--shuffle", "--accumulation", "2"]
    assert launch(tmp_path, 2, tmp_path, "save", 3, *options).returncode == 0
    resumed = launch(tmp_path, 2, tmp_path, "resume", 0, *options)
    assert resumed.returncode == 0, resumed.stderr[-5000:]
    assert "checkpoint written by" not in resumed.stderr  # nothing to say: no resize
    uninterrupted, continued = records(tmp_path, "save")[0], records(tmp_path, "resume")[0]
    assert continued["weights"] == uninterrupted["weights"]


def test_a_global_batch_that_cannot_be_kept_is_refused_in_one_line(tmp_path):
    assert launch(tmp_path, 1, tmp_path, "save", 3, "--keep").returncode == 0
    resumed = launch(tmp_path, 2, tmp_path, "resume", 0, "--keep")
    assert resumed.returncode == 2, resumed.stderr[-5000:]
    assert "Traceback" not in resumed.stderr
    errors = [line for line in resumed.stderr.splitlines() if "error" in line]
    assert errors == [
        "accel launch: error: keep_global_batch_size: the checkpoint's global batch is "
        "1 processes x batch 4 x 1 accumulation steps = 4 samples, which 2 processes x "
        "batch 4 cannot make up in whole accumulation steps; resume on 1 processes of batch 4 "
        "or on 2 processes of batch 1, 2"
    ]


def test_a_deepspeed_zero_checkpoint_of_another_size_names_the_conversion(tmp_path):
    pytest.importorskip("deepspeed")
    options = ["--deepspeed", "2"]
    env = {"ACCEL_PLUGINS": "deepspeed"}
    saved = launch(tmp_path, 2, tmp_path, "save", 3, *options, env=env)
    assert saved.returncode == 0, saved.stderr[-5000:]
    resumed = launch(tmp_path, 1, tmp_path, "resume", 0, *options, env=env)
    assert resumed.returncode == 2, resumed.stderr[-5000:]
    assert "Traceback" not in resumed.stderr
    (line,) = [line for line in resumed.stderr.splitlines() if "accel launch: error" in line]
    assert "written by 2 data-parallel processes and this run has 1" in line
    assert "python -m deepspeed.checkpoint.ds_to_universal --input_folder" in line
    # the command it names converts the checkpoint; with load_universal the resume goes on
    command = line.split("`")[1].split()
    converted = run_command([sys.executable, *command[1:]], timeout=300)
    assert converted.returncode == 0
    resumed = launch(tmp_path, 1, tmp_path, "resume", 0, *options, "--universal", env=env)
    assert resumed.returncode == 0, resumed.stderr[-5000:]
    assert "checkpoint written by 2 processes, resumed on 1" in resumed.stderr
    before, after = records(tmp_path, "save"), records(tmp_path, "resume")
    seen = [i for r in before for i in r["seen_at_save"]] + after[0]["seen"]
    assert sorted(seen) == list(range(96))


def test_megatron_resumes_under_another_tensor_parallel_layout(run_distributed, tmp_path):
    """Saved with tensor parallelism 2 (1 data-parallel rank), resumed with 2 data-parallel
    ranks: megatron-core reshards model and optimizer, the data position is global."""
    pytest.importorskip("megatron.core")
    run_distributed("megatron_resize.py", str(tmp_path), "save", "2", timeout=400)
    run_distributed("megatron_resize.py", str(tmp_path), "resume", "1", timeout=400)
    saved = json.loads((tmp_path / "save.json").read_text())
    resumed = json.loads((tmp_path / "resume.json").read_text())
    assert resumed["eval"] == pytest.approx(saved["eval"], abs=1e-6)  # the same model
    assert sorted(saved["seen"] + resumed["seen"]) == list(range(32))  # each sample once
