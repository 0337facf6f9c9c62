"""Elastic training on Ray: one epoch of a tiny regression that survives its worker group resizing.

``python elastic_train.py ray OUT ADDRESS [grow]`` is a Ray driver: a ``TorchTrainer`` with
``ScalingConfig(num_workers=(1, 2))`` (each worker needs one ``accel_test_node``, so one
worker per node) runs :func:`train` with ``pause``. ``python elastic_train.py script OUT
[pause] [grow] [reference]`` is the plain script (``accel launch --ray``; ``reference``: the
uninterrupted run under torchrun, which saves nothing).

The global batch is 2 per-process batches of 4 (accumulation 2 on one process, 1 on two)
and stays so across a resize (``keep_global_batch_size``). Every optimizer step is saved and
reported to Ray (``ACCEL_RAY_REPORT_CHECKPOINTS``). With ``pause``, the first group of 2
pauses one step past the checkpoint of step ``SHRINK_AT`` (OUT/paused-2 appears; the test
then removes a node), and with ``grow`` the first group of 1 pauses after step ``GROW_AT``
(OUT/paused-1; the test adds a node back and Ray grows the group).

Each process writes OUT/note-PID.json (rank, size, resumed checkpoint, accumulation) and
OUT/ids-PID.jsonl: after each save, the checkpoint's name and the sample ids this process
consumed so far, and ``end`` with all of them. Rank 0 writes OUT/final.pt and OUT/final.json.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
from accel import Accelerator, GradientAccumulationPlugin
from accel.utils import ProjectConfiguration, set_seed

SAMPLES = 96
SHRINK_AT = 4
GROW_AT = 7


def _pause(out: Path, size: int, accelerator: Accelerator) -> None:
    """The first group of ``size`` workers stops here until Ray replaces it."""
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        (out / f"paused-{size}").touch()
    while True:  # killed with its node, or by Ray's resize
        time.sleep(0.5)


def train(out: Path, pause: bool = False, grow: bool = False, save: bool = True) -> None:
    """One epoch, saved after every optimizer step; see the module docstring."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    set_seed(0)
    accelerator = Accelerator(
        cpu=True,
        gradient_accumulation_plugin=GradientAccumulationPlugin(
            num_steps=max(1, 2 // world), keep_global_batch_size=True
        ),
        project_config=ProjectConfiguration(
            project_dir=str(out / "project"), automatic_checkpoint_naming=True
        ),
    )
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(SAMPLES, 4, generator=generator)
    y = torch.tanh(x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]))
    data = torch.utils.data.TensorDataset(x, y, torch.arange(SAMPLES))
    loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1 + 0.05 * step))
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    resumed = accelerator.resume()
    size = accelerator.num_processes
    pid = os.getpid()
    note = {
        "rank": accelerator.process_index,
        "world": size,
        "resumed": Path(resumed).name if resumed else None,
        "accumulation": accelerator.gradient_accumulation_steps,
        "step": accelerator.step,
    }
    (out / f"note-{pid}.json").write_text(json.dumps(note))
    # optimizer steps so far: checkpoint_N is saved after step N + 1
    updates = int(note["resumed"].rpartition("_")[2]) + 1 if resumed else 0
    ids = out / f"ids-{pid}.jsonl"
    seen: list[int] = []
    for inputs, targets, index in loader:
        with accelerator.accumulate(model):
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        seen.extend(index.tolist())
        if not accelerator.sync_gradients:
            continue
        updates += 1
        if pause and size == 2 and updates == SHRINK_AT + 1:
            if not (out / "paused-2").exists():
                _pause(out, 2, accelerator)  # one step past checkpoint SHRINK_AT, unsaved
        if not save:
            continue
        path = accelerator.save_state()
        with open(ids, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"checkpoint": Path(path).name, "seen": seen}) + "\n")
        if grow and size == 1 and updates == GROW_AT:
            if not (out / "paused-1").exists():
                _pause(out, 1, accelerator)
    with open(ids, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"checkpoint": "end", "seen": seen}) + "\n")
    weights = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        torch.save({k: v.detach().clone() for k, v in weights.items()}, out / "final.pt")
        (out / "final.json").write_text(
            json.dumps({"lr": scheduler.get_last_lr()[0], "updates": updates, "world": size})
        )
    accelerator.end_training()


def start_reference(out: Path):
    """Start the uninterrupted run on 2 processes (torchrun) in the background: the size the
    elastic runs start at, so the same global batches and learning-rate schedule. It runs
    while Ray starts its workers; :func:`reference_weights` waits for it. ``None`` when an
    earlier test of the session already left its weights in ``out`` (the run is seeded)."""
    from accel.testing.processes import clean_environment, start_process, torchrun_command

    if (out / "final.pt").exists():
        return None
    command = torchrun_command(__file__, ["script", str(out), "reference"], nproc=2)
    return start_process(command, clean_environment())


def reference_weights(process, out: Path, timeout: float = 300) -> dict[str, torch.Tensor]:
    """Wait for :func:`start_reference`'s run (if it started one); its final weights."""
    from accel.testing.processes import finish_processes

    if process is not None:
        [(code, stdout, stderr)] = finish_processes([process], timeout)
        assert code == 0, stdout[-3000:] + stderr[-5000:]
    return torch.load(out / "final.pt")


def contributions(out: Path) -> tuple[list[int], list[int]]:
    """What the groups of a run in ``out`` trained on: the sample ids each group consumed up
    to the checkpoint the next group resumed from (all of them for the last group), and the
    groups' sizes, oldest first."""
    groups: list[list[dict]] = []
    notes = sorted(out.glob("note-*.json"), key=lambda path: path.stat().st_mtime)
    for path in notes:
        note = json.loads(path.read_text())
        ids = path.with_name(f"ids-{path.stem.split('-')[1]}.jsonl")
        lines = ids.read_text().splitlines() if ids.exists() else []
        note["ids"] = {line["checkpoint"]: line["seen"] for line in map(json.loads, lines)}
        if groups and groups[-1][0]["resumed"] == note["resumed"]:
            groups[-1].append(note)
        else:
            groups.append([note])
    seen: list[int] = []
    for i, group in enumerate(groups):
        assert len(group) == group[0]["world"], group  # every rank of the group started
        until = groups[i + 1][0]["resumed"] if i + 1 < len(groups) else "end"
        for note in group:
            seen += note["ids"][until]
    return seen, [group[0]["world"] for group in groups]


def train_loop_per_worker(config: dict) -> None:
    """What each Ray Train worker runs: report every save_state() to Ray by itself."""
    from accel_ray.checkpoints import REPORT_ENV

    os.environ[REPORT_ENV] = "true"
    train(Path(config["out"]), pause=True, grow=config["grow"])


def ray_driver(out: Path, address: str, grow: bool) -> None:
    """``TorchTrainer`` on 1 to 2 workers, one per node, two worker-group failures allowed."""
    import ray
    from accel_ray.testing import NODE_RESOURCE
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    ray.init(address=address, log_to_driver=True)
    trainer = TorchTrainer(
        train_loop_per_worker,
        train_loop_config={"out": str(out), "grow": grow},
        scaling_config=ScalingConfig(
            num_workers=(1, 2),
            resources_per_worker={"CPU": 1, NODE_RESOURCE: 1},
            elastic_resize_monitor_interval_s=1.0,
        ),
        run_config=RunConfig(
            name="accel-ray-elastic",
            storage_path=str(out / "ray-storage"),
            failure_config=FailureConfig(max_failures=2),
        ),
    )
    result = trainer.fit()
    (out / "ray-result.json").write_text(
        json.dumps({"checkpoint": result.checkpoint.path if result.checkpoint else None})
    )
    ray.shutdown()


if __name__ == "__main__":
    mode, folder = sys.argv[1], Path(sys.argv[2])
    folder.mkdir(parents=True, exist_ok=True)
    if mode == "ray":
        ray_driver(folder, sys.argv[3], grow="grow" in sys.argv[4:])
    else:
        flags = sys.argv[3:]
        train(folder, pause="pause" in flags, grow="grow" in flags, save="reference" not in flags)
