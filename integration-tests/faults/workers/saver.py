"""One process that resumes, then trains and checkpoints forever (total_limit=2) until killed.

argv: PROJECT_DIR. Prints ``resumed <path or None>`` first, then ``saved <path>`` per save.
"""

from __future__ import annotations

import sys

import torch
from accel import Accelerator, ProjectConfiguration


def main() -> None:
    accelerator = Accelerator(
        cpu=True,
        project_config=ProjectConfiguration(
            project_dir=sys.argv[1], automatic_checkpoint_naming=True, total_limit=2
        ),
    )
    torch.manual_seed(0)
    model = torch.nn.Sequential(*(torch.nn.Linear(512, 512) for _ in range(8)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    print("resumed", accelerator.resume(), flush=True)
    while True:
        loss = model(torch.randn(4, 512)).square().mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        print("saved", accelerator.save_state(), flush=True)


if __name__ == "__main__":
    main()
