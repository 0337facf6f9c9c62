"""A seeded small MLP with dropout, trained 3 epochs over a shuffling loader: every step's loss.

    python train_dropout.py --output train.json                           # 1 process
    accelerate launch --multi_gpu --num_processes 2 train_dropout.py --output train.json

The losses depend on the sample order and on the dropout masks, which come from the global
torch generator that the data loader also draws from: equal losses mean the same order and
the same use of the generator, step by step. ``--save-at STEP --checkpoint DIR`` stops each
case after STEP steps with ``save_state(DIR/<case>)``; ``--resume DIR`` continues from there
with ``load_state(DIR/<case>)`` and records the remaining steps (the prepared loader goes on
from its saved position: accel does that, Accelerate does not).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).parent))
from _common import fingerprint, run_cases  # noqa: E402
from accelerate import Accelerator  # noqa: E402
from accelerate.utils import DataLoaderConfiguration, set_seed  # noqa: E402

SEED = 42
EPOCHS = 3
SAMPLES = 60
BATCH_SIZE = 7

OPTIONS: argparse.Namespace


def _train(case: str, **config: Any) -> dict[str, Any]:
    set_seed(SEED)
    accelerator = Accelerator(cpu=True, dataloader_config=DataLoaderConfiguration(**config))
    inputs = torch.randn(SAMPLES, 8)
    targets = (inputs.sum(dim=1, keepdim=True) > 0).float()
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=BATCH_SIZE, shuffle=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    record: dict[str, Any] = {"after_prepare": fingerprint(), "losses": [], "rng": []}
    start_epoch, step = 0, 0
    if OPTIONS.resume:
        accelerator.load_state(Path(OPTIONS.resume) / case)
        step = json.loads((Path(OPTIONS.resume) / case / "position.json").read_text())["step"]
        start_epoch = step // len(loader)  # the loader itself continues at its saved position
    model.train()
    for _epoch in range(start_epoch, EPOCHS):
        for batch, labels in loader:
            loss = F.binary_cross_entropy_with_logits(model(batch), labels)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            record["losses"].append(loss.item())
            step += 1
            if OPTIONS.save_at == step:
                folder = Path(OPTIONS.checkpoint) / case
                accelerator.save_state(folder)
                if accelerator.is_main_process:
                    (folder / "position.json").write_text(json.dumps({"step": step}))
                accelerator.wait_for_everyone()
                return record
        record["rng"].append(fingerprint())
    return record


def default() -> dict[str, Any]:
    """The default data-loader configuration."""
    return _train("default")


def seedable() -> dict[str, Any]:
    """``use_seedable_sampler=True``."""
    return _train("seedable", use_seedable_sampler=True)


CASES = {"default": default, "seedable": seedable}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True)
    parser.add_argument("--case", action="append", default=[])
    parser.add_argument("--save-at", type=int, default=None, help="stop after this step, saving")
    parser.add_argument(
        "--checkpoint", default=None, help="where --save-at saves (a folder a case)"
    )
    parser.add_argument("--resume", default=None, help="load_state from here and continue")
    OPTIONS = parser.parse_args()
    if OPTIONS.save_at is not None and OPTIONS.checkpoint is None:
        parser.error("--save-at needs --checkpoint")
    run_cases("train_dropout", CASES, OPTIONS)
