"""Trainer.evaluate on 66 iterable samples with eval batch 8, for 1 and 2 processes.

``iterable_eval.py OUT`` writes OUT/eval-<N>.json on rank 0: the Trainer's ``eval_loss`` on the
iterable dataset (and, for reference, on the same rows as a map-style dataset). On one
process every batch is real; on two the dispatcher pads the last batch and gather_for_metrics
must drop those rows again, so the number is the same.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tiny  # noqa: E402


def main(out: str) -> None:
    import torch
    from torch.utils.data import IterableDataset
    from transformers import Trainer

    rows = tiny.lm_dataset(rows=66)

    class Stream(IterableDataset):
        def __iter__(self):
            for row in rows:
                yield {k: torch.tensor(v) for k, v in row.items()}

    trainer = Trainer(model=tiny.gpt2(), args=tiny.training_args(out), eval_dataset=Stream())
    iterable_loss = trainer.evaluate()["eval_loss"]
    map_loss = trainer.evaluate(eval_dataset=rows)["eval_loss"]
    accelerator = trainer.accelerator
    if accelerator.is_main_process:
        result = {
            "iterable_loss": iterable_loss,
            "map_loss": map_loss,
            "loader": type(trainer.get_eval_dataloader()).__name__,
        }
        Path(out, f"eval-{accelerator.num_processes}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
