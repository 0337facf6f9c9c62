"""One training function run three ways: in a Ray ``TorchTrainer``, under torchrun, under ``accel launch --ray``.

``python ray_train.py ray OUT ADDRESS`` is a Ray driver: 2 Ray Train workers (max_failures=1)
run :func:`train`; in the first attempt rank 1 SIGKILLs itself mid-step, after a
checkpoint was reported, and Ray restarts the worker group. The restarted workers use a
fresh ``project_dir`` (so ``accelerator.resume()`` can only find the checkpoint through
``ray.train.get_checkpoint()``). ``python ray_train.py script OUT [fail]`` is the plain
script (torchrun, ``accel launch``, ``accel launch --ray``): uninterrupted, and reporting to
Ray when it runs in a Ray Train worker; with ``fail``, rank 1 raises once the weights are
saved. Each writes OUT/final.pt, OUT/predictions.pt and one OUT/note-*.json per start.

The step loop uses prepare, accumulate, save_state (+ report to Ray), resume, a tracker
on the main process and gather_for_metrics; in Ray, a Ray Data shard's
``iter_torch_batches`` is the evaluation data.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import torch
from accel import Accelerator, ProjectConfiguration
from accel.tracking import GeneralTracker
from accel.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 2
KILL_AT = (1, 3)
"""(epoch, micro-batch): rank 1 dies one micro-batch after the checkpoint of step 2 of epoch 1."""
SAMPLES = 64


class FileTracker(GeneralTracker):
    """Writes each ``log`` call as a JSON line (checks that trackers run on the main process only)."""

    name = "file"
    requires_logging_directory = False

    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    @property
    def tracker(self):
        return self.path

    def store_init_configuration(self, values):
        self.log({"config": values})

    def log(self, values, step=None, **kwargs):
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"step": step, **values, "pid": os.getpid()}) + "\n")


def train(out: Path, kill: bool = False, ray_data: bool = False, fail: bool = False) -> None:
    """Train a tiny model for EPOCHS; rank 0 writes out/final.pt.

    ``kill``: rank 1 of the first attempt SIGKILLs itself at KILL_AT; ``ray_data``: also
    gather the ids of the Ray Data shard ``eval``; ``fail``: rank 1 raises at the end.
    """
    import torch.distributed as dist
    from accel_ray import in_ray_train_worker, save_and_report

    in_ray = in_ray_train_worker()

    group_before = dist.is_available() and dist.is_initialized()
    attempt = 1 if (out / "killed").exists() else 0
    set_seed(0)
    accelerator = Accelerator(
        cpu=True,
        gradient_accumulation_steps=2,
        log_with=[FileTracker(out / f"tracker-attempt{attempt}.jsonl")],
        project_config=ProjectConfiguration(
            project_dir=str(out / f"project-attempt{attempt}"),
            automatic_checkpoint_naming=True,
            total_limit=2,
        ),
    )
    accelerator.init_trackers("ray-test", config={"epochs": EPOCHS})
    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(
        torch.randn(SAMPLES, 8, generator=generator), torch.randn(SAMPLES, 1, generator=generator)
    )
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.9)
    loader = DataLoader(data, batch_size=4, shuffle=True)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    resumed = accelerator.resume()
    note = {
        "rank": accelerator.process_index,
        "world": accelerator.num_processes,
        "pid": os.getpid(),
        "group_before_accelerator": group_before,
        "distributed_type": str(accelerator.distributed_type),
        "backend": dist.get_backend() if dist.is_initialized() else None,
        "resumed": resumed,
        "attempt": attempt,
        "master_addr": os.environ.get("MASTER_ADDR"),
        "ray_node": _ray_node() if in_ray else None,
    }
    (out / f"note-rank{accelerator.process_index}-attempt{attempt}.json").write_text(
        json.dumps(note)
    )
    while loader.epoch < EPOCHS:
        for inputs, targets in loader:
            with accelerator.accumulate(model):
                loss = torch.nn.functional.mse_loss(model(inputs), targets)
                accelerator.backward(loss)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            if (
                kill
                and attempt == 0
                and accelerator.process_index == 1
                and (loader.epoch, accelerator.step) == KILL_AT
            ):
                (out / "killed").touch()
                os.kill(os.getpid(), signal.SIGKILL)  # mid-step: one micro-batch past a checkpoint
            if accelerator.sync_gradients:
                accelerator.log({"loss": loss.item()}, step=accelerator.step)
                if in_ray:
                    save_and_report(accelerator, {"loss": loss.item()})
                else:
                    accelerator.save_state()
    # every sample's prediction, gathered once (gather_for_metrics drops the padding)
    model.eval()
    eval_loader = accelerator.prepare(DataLoader(data, batch_size=5))
    predictions = torch.cat([accelerator.gather_for_metrics(model(x)) for x, _ in eval_loader])
    if ray_data:
        import ray.train

        shard = ray.train.get_dataset_shard("eval")
        seen = torch.cat(
            [
                accelerator.gather_for_metrics(batch["id"])
                for batch in shard.iter_torch_batches(batch_size=3)
            ]
        )
        (out / f"ray-data-rank{accelerator.process_index}.json").write_text(
            json.dumps(sorted(seen.tolist()))
        )
    if accelerator.is_main_process:
        torch.save(accelerator.unwrap_model(model).state_dict(), out / "final.pt")
        torch.save(predictions, out / "predictions.pt")
    accelerator.wait_for_everyone()  # the files are written before any rank fails
    accelerator.end_training()
    if fail and accelerator.process_index == 1:
        raise ValueError("rank 1 fails after training")


def _ray_node() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def train_loop_per_worker(config: dict) -> None:
    """What each Ray Train worker runs."""
    train(Path(config["out"]), kill=True, ray_data=True)


def ray_driver(out: Path, address: str) -> None:
    """Run train() on 2 Ray Train workers, one restart allowed; Ray Data feeds the evaluation."""
    import ray
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    ray.init(address=address, log_to_driver=True)
    ray.data.DataContext.get_current().enable_progress_bars = False
    trainer = TorchTrainer(
        train_loop_per_worker,
        train_loop_config={"out": str(out)},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
        run_config=RunConfig(
            name="accel-ray-test",
            storage_path=str(out / "ray-storage"),
            failure_config=FailureConfig(max_failures=1),
        ),
        datasets={"eval": ray.data.range(SAMPLES).map(lambda row: {"id": row["id"]})},
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
        ray_driver(folder, sys.argv[3])
    else:
        train(folder, fail=sys.argv[3:] == ["fail"])
