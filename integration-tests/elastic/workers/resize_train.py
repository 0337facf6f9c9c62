"""Worker: trains a tiny regression on 96 indexed samples, saving or resuming with resume().

Arguments: OUT MODE STOP [options]. MODE ``save`` saves a checkpoint after STOP optimizer
steps and goes on to the end (the uninterrupted run); ``resume`` loads the newest checkpoint
of OUT/project and runs to the end. Every rank's sample ids (seen before the save, and in
all), and on rank 0 the final weights and learning rate, go to OUT/<MODE>-rank<R>.json.
Options: --shuffle, --seedable, --accumulation G, --keep (keep_global_batch_size),
--fsdp (FSDP2 through FullyShardedDataParallelPlugin), --deepspeed STAGE (ZeRO),
--universal (DeepSpeed loads universal checkpoints), --epochs E, --batch B (per process),
--samples S (the dataset's length), --record-fsync (every os.fsync call, wrapped: the real one
runs, with its time and path, goes to the record).
"""

import argparse
import json
import os
import time
from pathlib import Path

import torch
from accel import Accelerator, DataLoaderConfiguration, GradientAccumulationPlugin
from accel.utils import ProjectConfiguration, set_seed

parser = argparse.ArgumentParser()
parser.add_argument("out", type=Path)
parser.add_argument("mode", choices=["save", "resume"])
parser.add_argument("stop", type=int)
parser.add_argument("--shuffle", action="store_true")
parser.add_argument("--seedable", action="store_true")
parser.add_argument("--accumulation", type=int, default=1)
parser.add_argument("--keep", action="store_true")
parser.add_argument("--fsdp", action="store_true")
parser.add_argument("--deepspeed", type=int, default=None)
parser.add_argument("--universal", action="store_true")
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--batch", type=int, default=4)
parser.add_argument("--samples", type=int, default=96)
parser.add_argument("--record-fsync", action="store_true")
args = parser.parse_args()

fsyncs: list[tuple[int, str]] = []
if args.record_fsync:
    real_fsync = os.fsync

    def recording_fsync(fd):
        number = fd if isinstance(fd, int) else fd.fileno()
        fsyncs.append((time.monotonic_ns(), os.readlink(f"/proc/self/fd/{number}")))
        return real_fsync(fd)

    os.fsync = recording_fsync

kwargs = {}
if args.fsdp:
    from accel_fsdp import FullyShardedDataParallelPlugin

    kwargs["fsdp_plugin"] = FullyShardedDataParallelPlugin(
        fsdp_version=2, state_dict_type="SHARDED_STATE_DICT"
    )
if args.deepspeed is not None:
    from accel_deepspeed import DeepSpeedPlugin

    config = {
        "train_micro_batch_size_per_gpu": args.batch,
        "gradient_accumulation_steps": args.accumulation,
        "zero_optimization": {"stage": args.deepspeed},
        "checkpoint": {"load_universal": args.universal},
    }
    kwargs["deepspeed_plugin"] = DeepSpeedPlugin(hf_ds_config=config)
project = args.out / "project"
accelerator = Accelerator(
    gradient_accumulation_plugin=GradientAccumulationPlugin(
        num_steps=args.accumulation, keep_global_batch_size=args.keep
    ),
    dataloader_config=DataLoaderConfiguration(use_seedable_sampler=args.seedable),
    project_config=ProjectConfiguration(project_dir=str(project), automatic_checkpoint_naming=True),
    **kwargs,
)
set_seed(0)
generator = torch.Generator().manual_seed(1)
x = torch.randn(args.samples, 4, generator=generator)
noise = 0.1 * torch.randn(args.samples, 1, generator=generator)
y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + noise
data = torch.utils.data.TensorDataset(x, y, torch.arange(args.samples))
loader = torch.utils.data.DataLoader(data, batch_size=args.batch, shuffle=args.shuffle)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
if args.deepspeed is None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
else:  # DeepSpeed's universal conversion knows Adam's states
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1 + 0.01 * step))
model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
if args.mode == "resume":
    assert accelerator.resume() is not None, "no checkpoint to resume"

seen: list[int] = []
seen_at_save: list[int] | None = None
updates = 0
for _epoch in range(args.epochs):
    for inputs, targets, ids in loader:
        with accelerator.accumulate(model):
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        seen.extend(ids.tolist())
        if accelerator.sync_gradients:
            updates += 1
            if args.mode == "save" and updates == args.stop:
                accelerator.save_state()
                seen_at_save = list(seen)

weights = accelerator.get_state_dict(model)
record = {
    "rank": accelerator.process_index,
    "num_processes": accelerator.num_processes,
    "accumulation": accelerator.gradient_accumulation_steps,
    "seen": seen,
    "seen_at_save": seen_at_save,
    "updates": updates,
    "fsyncs": fsyncs,
}
if accelerator.is_main_process:
    record["weights"] = {k: v.float().flatten().tolist() for k, v in weights.items()}
    record["lr"] = scheduler.get_last_lr()[0]
(args.out / f"{args.mode}-rank{accelerator.process_index}.json").write_text(json.dumps(record))
accelerator.end_training()
