"""A training script that resumes by itself: ``accelerator.resume()`` after prepare.

argv: OUT_DIR PACE_SECONDS. Checkpoints after every step and at every epoch end
(automatic naming, total_limit=3); rank 0 writes the final weights to OUT_DIR/final.pt.
Each start writes OUT_DIR/started-rank<r>-restart<n>.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch
from accel import Accelerator, ProjectConfiguration
from accel.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 2


def main() -> None:
    out, pace = Path(sys.argv[1]), float(sys.argv[2])
    set_seed(0)
    accelerator = Accelerator(
        cpu=True,
        project_config=ProjectConfiguration(
            project_dir=str(out / "project"), automatic_checkpoint_naming=True, total_limit=3
        ),
    )
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    (out / f"started-rank{accelerator.process_index}-restart{restart}").touch()
    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(
        torch.randn(96, 8, generator=generator), torch.randn(96, 1, generator=generator)
    )
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.9)
    loader = DataLoader(data, batch_size=8, shuffle=True)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    accelerator.resume()
    # the prepared loader's epoch is restored with it: a checkpoint taken right after an
    # epoch's last batch resumes at the start of the next epoch
    while loader.epoch < EPOCHS:
        for inputs, targets in loader:
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            accelerator.save_state()
            time.sleep(pace)
        accelerator.save_state()
    if accelerator.is_main_process:
        torch.save(accelerator.unwrap_model(model).state_dict(), out / "final.pt")
    accelerator.end_training()


if __name__ == "__main__":
    main()
