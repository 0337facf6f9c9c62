"""An Accelerator inside a Ray ``TorchTrainer``: Ray's process group, Ray's checkpoints, Ray Data.

One Ray run (the most expensive part of these tests): 2 Ray Train workers train with
prepare / accumulate / save_state + report / a tracker / gather_for_metrics; rank 1 is
SIGKILLed mid-step, Ray restarts the worker group, ``accelerator.resume()`` restores the
last reported checkpoint through ``ray.train.get_checkpoint()`` into a fresh project
folder, and the final weights are bit-identical to an uninterrupted torchrun run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from accel.testing.processes import (
    clean_environment,
    finish_processes,
    start_process,
    torchrun_command,
)

WORKERS = Path(__file__).parent / "workers"


@pytest.mark.timeout(600)
def test_killed_worker_resumes_from_ray_checkpoint(ray_cluster, quick_train, tmp_path):
    # the uninterrupted torchrun run goes on while Ray starts its workers
    reference = tmp_path / "torchrun"
    command = torchrun_command(WORKERS / "ray_train.py", ["script", str(reference)], nproc=2)
    uninterrupted = start_process(command, clean_environment())
    out = tmp_path / "ray"
    try:
        done = subprocess.run(
            [sys.executable, str(WORKERS / "ray_train.py"), "ray", str(out), ray_cluster.address],
            env={**ray_cluster.environment(), **quick_train},
            capture_output=True,
            text=True,
            timeout=480,
        )
    finally:
        [(code, stdout, stderr)] = finish_processes([uninterrupted], timeout=120)
    assert code == 0, stdout[-3000:] + stderr[-5000:]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]

    notes = {p.stem: json.loads(p.read_text()) for p in out.glob("note-*.json")}
    assert sorted(notes) == [
        "note-rank0-attempt0",
        "note-rank0-attempt1",
        "note-rank1-attempt0",
        "note-rank1-attempt1",
    ], notes
    for note in notes.values():
        # Ray set the group up before the Accelerator existed; accel joined it
        assert note["group_before_accelerator"] is True, note
        assert (note["distributed_type"], note["backend"], note["world"]) == (
            "MULTI_CPU",
            "gloo",
            2,
        )
        assert note["master_addr"] == "127.0.0.1", note
    assert notes["note-rank0-attempt0"]["resumed"] is None
    resumed = {notes[f"note-rank{r}-attempt1"]["resumed"] for r in (0, 1)}
    # the restarted workers' project folder was empty: the checkpoint came from Ray
    assert len(resumed) == 1 and "project-attempt1/checkpoints/checkpoint_" in resumed.pop()

    ours = torch.load(out / "final.pt")
    theirs = torch.load(reference / "final.pt")
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert torch.equal(torch.load(out / "predictions.pt"), torch.load(reference / "predictions.pt"))

    # Ray holds accel's checkpoints under accel's names, with accel's manifest
    storage = out / "ray-storage" / "accel-ray-test"
    names = sorted(p.name for p in storage.glob("checkpoint_*") if p.is_dir())
    assert names and all((storage / n / "accel_manifest.json").is_file() for n in names), names
    result = json.loads((out / "ray-result.json").read_text())
    assert result["checkpoint"] and Path(result["checkpoint"]).name == "checkpoint_7", result

    # the tracker ran on the main process only, in each attempt
    for attempt in (0, 1):
        pids = {
            json.loads(line)["pid"]
            for line in (out / f"tracker-attempt{attempt}.jsonl").read_text().splitlines()
        }
        assert pids == {notes[f"note-rank0-attempt{attempt}"]["pid"]}, pids
    # Ray Data: the two shards' iter_torch_batches, gathered, hold every row once
    for rank in (0, 1):
        assert json.loads((out / f"ray-data-rank{rank}.json").read_text()) == list(range(64))
