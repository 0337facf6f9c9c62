"""A tiny regression trained with an unchanged accel loop; records what each step did.

Run by ``accel launch --ft`` in tests and in tools/bench/ft_failures.py. Each process appends
JSON lines to ``<out>/group<G>.jsonl``: one ``start`` line, then per step the samples it
trained, whether the step committed, the loss, a digest of the parameters and optimizer
state after the step and, under ``--ft``, the steps committed so far and the scheduler's. At the end, the first group writes the full-data loss.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from pathlib import Path

import torch
from accel import Accelerator
from accel.utils import DataLoaderConfiguration, ProjectConfiguration

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--samples", type=int, default=960)
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument(
    "--step_sleep",
    type=float,
    default=0.0,
    help="sleep this long inside each step (before backward)",
)
parser.add_argument(
    "--slow_until", default=None, help="sleep --step_sleep per step until this file exists"
)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--max_steps", type=int, default=0, help="stop after this many steps (0: all)")
parser.add_argument(
    "--checkpoint_every",
    type=int,
    default=0,
    help="without --ft (accel's restart-and-resume path): save_state every N steps, resume()",
)
args = parser.parse_args()


class Regression(torch.utils.data.Dataset):
    """Sample i: its id, 16 features and a noisy linear target (the same in every process)."""

    def __init__(self, n: int):
        g = torch.Generator().manual_seed(1234)
        self.x = torch.randn(n, 16, generator=g)
        w = torch.randn(16, 1, generator=g)
        self.y = self.x @ w + 0.1 * torch.randn(n, 1, generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return torch.tensor(i), self.x[i], self.y[i]


def digest(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    for state in optimizer.state_dict()["state"].values():
        for value in state.values():
            if torch.is_tensor(value):
                h.update(value.detach().numpy().tobytes())
    return h.hexdigest()[:16]


out = Path(args.out)
project = ProjectConfiguration(project_dir=str(out / "project"), automatic_checkpoint_naming=True)
accelerator = Accelerator(
    dataloader_config=DataLoaderConfiguration(data_seed=7),
    project_config=project if args.checkpoint_every else None,
)
torch.manual_seed(0)
dataset = Regression(args.samples)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=50, gamma=0.9)
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
if args.checkpoint_every:
    accelerator.resume()

# only to record what happened (accel-ft's session, if any): the loop is the usual one
session = getattr(accelerator.backend, "session", None)
group = session.group if session is not None else accelerator.process_index
out.mkdir(parents=True, exist_ok=True)
record = open(out / f"group{group}.jsonl", "a", buffering=1)
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
record.write(json.dumps({"event": "start", "pid": os.getpid(), "restart": restart}) + "\n")
global_batch = args.batch_size * (
    session.batch_groups if session is not None else accelerator.num_processes
)


def position() -> tuple[int, int, int]:
    """(epoch, samples of the epoch trained, global step) of the loader's position."""
    state = loader.state_dict()
    epoch, seen = state["epoch"], state["samples_seen"]
    per_epoch = -(-args.samples // global_batch)
    return epoch, seen, epoch * per_epoch + -(-seen // global_batch)


done = False
for _epoch in range(args.epochs):  # the usual loop: a healed group skips finished epochs
    for ids, x, y in loader:
        epoch, start, step = position()
        if args.max_steps and step >= args.max_steps:
            done = True
            break
        members = list(session.plan.members) if session is not None else [group]
        # written before the step: a group killed during it still says what it trained
        fetch = {"event": "fetch", "epoch": epoch, "start": start, "members": members}
        record.write(json.dumps({**fetch, "step": step, "ids": ids.tolist()}) + "\n")
        loss = torch.nn.functional.mse_loss(model(x), y)
        if args.step_sleep and not (args.slow_until and os.path.exists(args.slow_until)):
            # inside the step (its quorum formed, gradients not yet averaged): a group killed
            # now fails the step for the others, who retrain its samples in the next one
            time.sleep(args.step_sleep)
        accelerator.backward(loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        committed = not optimizer.step_was_skipped
        state = digest(accelerator.unwrap_model(model), optimizer) if committed else None
        row = {**fetch, "event": "step", "step": step, "committed": committed}
        row.update(loss=loss.item(), time=time.time(), digest=state)
        if session is not None:  # the schedule must advance with the commits only
            row.update(commits=session.manager.current_step())
            row.update(schedule=scheduler.state_dict()["last_epoch"])
        record.write(json.dumps(row) + "\n")
        if args.checkpoint_every and committed and (step + 1) % args.checkpoint_every == 0:
            accelerator.save_state()
    if done:
        break

if session is None or (session.members and session.members[0] == session.group):
    with torch.no_grad():
        full = torch.nn.functional.mse_loss(accelerator.unwrap_model(model)(dataset.x), dataset.y)
    record.write(
        json.dumps(
            {"event": "end", "full_loss": full.item(), "skipped": getattr(loader, "skipped", [])}
        )
        + "\n"
    )
record.write(json.dumps({"event": "exit"}) + "\n")
