"""Trainer(auto_find_batch_size=True) + DeepSpeed ZeRO-2 on a model with a 0-dim parameter.

Run on 2 CPU processes (``accel launch --cpu --num_processes 2``, DS_ACCELERATOR=cpu). The
model divides its logits by a scalar ``temperature`` (``nn.Parameter(torch.tensor(...))``,
initialised differently on each rank) and raises ``torch.OutOfMemoryError`` for batches over
4 rows, so the Trainer starts at 5, fails, retries with 4 and prepares again: a second
engine for the same module. Checks (``rank<r> ok <check>`` lines): training ends, the temperature
is the same on both ranks (broadcast from rank 0) and trained, the accelerator knows one
engine (the new one), and the weights equal those of the same model with a shape-(1,)
temperature, which DeepSpeed handles itself.

Usage: ``trainer_scalar_param.py OUTPUT_DIR``.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
from datasets import Dataset
from transformers import Trainer, TrainingArguments

CONFIG = {
    "train_micro_batch_size_per_gpu": "auto",
    "train_batch_size": "auto",
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "zero_optimization": {"stage": 2},
}


class Scaled(torch.nn.Module):
    """A linear classifier whose logits are divided by a learned temperature."""

    def __init__(self, scalar: bool, start: float):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 3)
        value = torch.tensor(start) if scalar else torch.tensor([start])
        self.temperature = torch.nn.Parameter(value)

    def forward(self, x, labels=None):
        if x.shape[0] > 4:
            raise torch.OutOfMemoryError("out of memory (test: batches over 4 rows)")
        logits = self.linear(x) / self.temperature
        return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}


def train(out: str, scalar: bool, start: float) -> Trainer:
    generator = torch.Generator().manual_seed(1)
    data = Dataset.from_dict(
        {
            "x": torch.randn(32, 4, generator=generator).tolist(),
            "labels": torch.randint(0, 3, (32,), generator=generator).tolist(),
        }
    )
    args = TrainingArguments(
        output_dir=out,
        per_device_train_batch_size=5,
        auto_find_batch_size=True,
        max_steps=3,
        learning_rate=0.05,
        deepspeed=CONFIG,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        remove_unused_columns=False,
        seed=0,
        data_seed=0,
    )
    trainer = Trainer(model=Scaled(scalar, start), args=args, train_dataset=data)
    trainer.train()
    return trainer


def main() -> None:
    out = sys.argv[1]
    rank = int(os.environ["RANK"])
    trainer = train(f"{out}/scalar", scalar=True, start=1.0 + rank)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 3, trainer.state.log_history
    assert trainer._train_batch_size == 4, trainer._train_batch_size
    print(f"rank{rank} ok trained at batch size 4 after an out-of-memory error", flush=True)

    temperature = trainer.model.temperature.detach().clone()
    assert temperature.dim() == 0
    both = [torch.zeros(()) for _ in range(2)]
    dist.all_gather(both, temperature)
    assert both[0] == both[1], both
    assert temperature != 1.0, temperature
    print(f"rank{rank} ok temperature broadcast and trained: {temperature.item():.6f}", flush=True)

    backend = trainer.accelerator.backend
    assert backend.engines == [trainer.model_wrapped], backend.engines
    assert backend.engine_of(trainer.model) is trainer.model_wrapped
    print(f"rank{rank} ok one engine", flush=True)

    weights = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    reference = train(f"{out}/vector", scalar=False, start=1.0)
    expected = {k: v.detach() for k, v in reference.model.named_parameters()}
    for name, value in weights.items():
        torch.testing.assert_close(value.reshape(expected[name].shape), expected[name])
    print(f"rank{rank} ok same weights as with a shape-(1,) temperature", flush=True)


if __name__ == "__main__":
    main()
