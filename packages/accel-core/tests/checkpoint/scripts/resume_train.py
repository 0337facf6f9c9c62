"""Training job used by test_resume.py: train, checkpoint mid-way, resume in a fresh process.

    resume_train.py full OUT.pt                      train 0 -> N, write the final state
    resume_train.py save CKPT_ROOT K[,K...]          train 0 -> max(K), save_state after step K
    resume_train.py resume CKPT OUT.pt               load_state(CKPT), continue to N (position from the loader)
    resume_train.py resume-skip CKPT OUT.pt          load_state(CKPT), then skip_first_batches, Accelerate style

Steps are counted in optimizer steps (one per batch). A checkpoint saved after
step K is written to ``CKPT_ROOT/step_K``; K equal to a multiple of the epoch
length is saved inside the loop, right after the last batch of that epoch, and
``K`` written as ``Ke`` is saved after the inner loop finished (between epochs).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from accel import Accelerator
from accel.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 3
SAMPLES = 40
BATCH = 4
STEPS_PER_EPOCH = SAMPLES // BATCH


def build():
    set_seed(1234)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 1))
    generator = torch.Generator().manual_seed(99)
    x = torch.randn(SAMPLES, 6, generator=generator)
    y = torch.randn(SAMPLES, 1, generator=generator)
    index = torch.arange(SAMPLES)
    loader = DataLoader(TensorDataset(x, y, index), batch_size=BATCH, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.5)
    accelerator = Accelerator(cpu=True)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    return accelerator, model, optimizer, loader, scheduler


def train_step(accelerator, model, optimizer, scheduler, batch, seen):
    xb, yb, ib = batch
    seen.extend(ib.tolist())
    loss = nn.functional.mse_loss(model(xb), yb)
    accelerator.backward(loss)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()


def write_result(path, accelerator, model, optimizer, scheduler, seen):
    torch.save(
        {
            "model": accelerator.unwrap_model(model).state_dict(),
            "optimizer": optimizer.state_dict(),
            "lr": scheduler.get_last_lr(),
            "rng": torch.get_rng_state(),
        },
        path,
    )
    Path(str(path) + ".json").write_text(json.dumps({"seen": seen}))


def main(argv):
    mode = argv[0]
    accelerator, model, optimizer, loader, scheduler = build()
    seen: list[int] = []
    start_epoch = 0

    if mode == "full":
        for _epoch in range(start_epoch, EPOCHS):
            for batch in loader:
                train_step(accelerator, model, optimizer, scheduler, batch, seen)
        write_result(argv[1], accelerator, model, optimizer, scheduler, seen)
        return

    if mode == "save":
        root = Path(argv[1])
        inside = {int(k) for k in argv[2].split(",") if not k.endswith("e")}
        between = {int(k[:-1]) for k in argv[2].split(",") if k.endswith("e")}
        last = max(inside | between)
        step = 0
        for _epoch in range(EPOCHS):
            for batch in loader:
                train_step(accelerator, model, optimizer, scheduler, batch, seen)
                step += 1
                if step in inside:
                    accelerator.save_state(root / f"step_{step}")
            if step in between:
                accelerator.save_state(root / f"step_{step}e")
            if step >= last:
                return
        return

    checkpoint = Path(argv[1])
    accelerator.load_state(checkpoint)
    if mode == "resume":
        # the loader's position (epoch, batches already seen) was restored by load_state
        start_epoch = loader.epoch
        for _epoch in range(start_epoch, EPOCHS):
            for batch in loader:
                train_step(accelerator, model, optimizer, scheduler, batch, seen)
    elif mode == "resume-skip":
        # Accelerate's recipe: work the position out of the step number, skip the batches seen
        resume_step = int(checkpoint.name.split("_")[1].rstrip("e"))
        start_epoch, skip = divmod(resume_step, len(loader))
        for epoch in range(start_epoch, EPOCHS):
            if epoch == start_epoch and skip:
                active = accelerator.skip_first_batches(loader, skip)
            else:
                active = loader
            for batch in active:
                train_step(accelerator, model, optimizer, scheduler, batch, seen)
    else:
        raise SystemExit(f"unknown mode {mode}")
    write_result(argv[2], accelerator, model, optimizer, scheduler, seen)


if __name__ == "__main__":
    main(sys.argv[1:])
