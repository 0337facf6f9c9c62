"""Worker for torchrun's elastic membership: trains one epoch, a checkpoint every optimizer step.

Arguments: OUT [options]. Every attempt (one worker group) calls ``accelerator.resume()``
first, so it continues from the newest complete checkpoint of OUT/project whatever the
number of processes (keep_global_batch_size re-derives the accumulation steps).

Records, in OUT/records/<attempt>-rank<R>.jsonl (one JSON object per line):

* a header ``{"attempt", "started", "rank", "world", "accumulation", "resumed_from"}``:
  ``attempt`` is rank 0's id of the group, ``started`` its start time (groups run one after
  the other), ``resumed_from`` the number K of the ``checkpoint_K`` resumed (-1: fresh);
* per optimizer step, *before* ``save_state``: ``{"checkpoint": K, "ids": [...]}``, the
  sample ids this rank consumed since its previous record and the number of the checkpoint
  about to cover them. Written first, a record exists for every rank of every checkpoint
  that completes; a checkpoint cut short by a kill is not resumed, so the samples of a
  record count only if the next attempt resumed from a checkpoint K or later;
* at the end ``{"checkpoint": "end", "ids": [...]}``, and on rank 0 OUT/final.json with the
  weights.

Options: --samples N (a multiple of the global batch), --global_batch (per-process batch 4;
the accumulation steps of a fresh start give it; a resume keeps the checkpoint's), --sleep S
after every batch, --hold_world W --hold_after K: a group of W processes that has made K
optimizer steps waits while OUT/hold exists (so that a test can let a node join at a known
point).
"""

import argparse
import json
import time
import uuid
from pathlib import Path

import torch
from accel import Accelerator, GradientAccumulationPlugin, PartialState
from accel.distributed.operations import broadcast_object_list
from accel.utils import ProjectConfiguration, set_seed

BATCH = 4

parser = argparse.ArgumentParser()
parser.add_argument("out", type=Path)
parser.add_argument("--samples", type=int, default=160)
parser.add_argument("--global_batch", type=int, default=8)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--hold_world", type=int, default=0)
parser.add_argument("--hold_after", type=int, default=2)
args = parser.parse_args()

world = PartialState().num_processes
assert args.global_batch % (BATCH * world) == 0, (args.global_batch, world)
accelerator = Accelerator(
    gradient_accumulation_plugin=GradientAccumulationPlugin(
        num_steps=args.global_batch // (BATCH * world), keep_global_batch_size=True
    ),
    project_config=ProjectConfiguration(
        project_dir=str(args.out / "project"), automatic_checkpoint_naming=True, total_limit=3
    ),
)
set_seed(0)
generator = torch.Generator().manual_seed(1)
x = torch.randn(args.samples, 4, generator=generator)
noise = 0.1 * torch.randn(args.samples, 1, generator=generator)
y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + noise
data = torch.utils.data.TensorDataset(x, y, torch.arange(args.samples))
loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
resumed = accelerator.resume()

token = [f"{time.time():.6f}-{uuid.uuid4().hex[:8]}" if accelerator.is_main_process else None]
broadcast_object_list(token)  # every rank of this group names the attempt alike
attempt = token[0]
records = args.out / "records"
records.mkdir(parents=True, exist_ok=True)
rank = accelerator.process_index
log = (records / f"{attempt}-rank{rank}.jsonl").open("a", buffering=1)


def write(entry: dict) -> None:
    log.write(json.dumps(entry) + "\n")  # one write per line; line-buffered: on disk at once
    log.flush()


write(
    {
        "attempt": attempt,
        "started": float(attempt.split("-")[0]),
        "rank": rank,
        "world": accelerator.num_processes,
        "accumulation": accelerator.gradient_accumulation_steps,
        "resumed_from": int(Path(resumed).name.split("_")[-1]) if resumed else -1,
    }
)

pending: list[int] = []
updates = 0
hold = args.out / "hold"
for inputs, targets, ids in loader:
    with accelerator.accumulate(model):
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    pending.extend(ids.tolist())
    if accelerator.sync_gradients:
        write({"checkpoint": accelerator.save_iteration, "ids": pending})
        pending = []
        accelerator.save_state()
        updates += 1
        if accelerator.num_processes == args.hold_world and updates >= args.hold_after:
            deadline = time.monotonic() + 300
            while hold.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
    time.sleep(args.sleep)

write({"checkpoint": "end", "ids": pending})
weights = accelerator.get_state_dict(model)
if accelerator.is_main_process:
    final = {
        "world": accelerator.num_processes,
        "weights": {k: v.float().flatten().tolist() for k, v in weights.items()},
    }
    (args.out / "final.json").write_text(json.dumps(final))
accelerator.end_training()
