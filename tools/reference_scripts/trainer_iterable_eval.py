"""transformers' ``Trainer.evaluate`` on an ``IterableDataset`` of 66 rows, eval batch 8.

    python trainer_iterable_eval.py --output eval.json                            # 1 process
    accelerate launch --multi_gpu --num_processes 2 trainer_iterable_eval.py --output eval.json

66 rows in global batches of 16 leave a last batch of 2: how the prepared loader splits and
pads it, and what ``gather_for_metrics`` keeps, decide ``eval_loss``. Cases: ``iterable`` (the
rows as an ``IterableDataset``: Accelerate dispatches it by default) and ``map`` (the same rows
as a map-style ``datasets.Dataset``).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration-tests" / "hf_stack"))
import tiny  # noqa: E402
from _common import parse_args, run_cases  # noqa: E402


def _evaluate(iterable: bool) -> dict[str, Any]:
    import torch
    from torch.utils.data import IterableDataset
    from transformers import Trainer

    rows = tiny.lm_dataset(rows=66)

    class Stream(IterableDataset):
        def __iter__(self):
            for row in rows:
                yield {k: torch.tensor(v) for k, v in row.items()}

    with tempfile.TemporaryDirectory() as out:
        trainer = Trainer(model=tiny.gpt2(), args=tiny.training_args(out))
        metrics = trainer.evaluate(eval_dataset=Stream() if iterable else rows)
    return {"eval_loss": metrics["eval_loss"]}


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    run_cases(
        "trainer_iterable_eval.py",
        {"iterable": lambda: _evaluate(True), "map": lambda: _evaluate(False)},
        args,
    )


if __name__ == "__main__":
    main()
