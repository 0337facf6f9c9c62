"""A Trainer run on the tiny GPT-2, for launches on several processes.

``trainer_worker.py OUT`` trains 2 epochs with gradient accumulation and evaluation; rank 0
writes OUT/result.json: the logged (loss, grad_norm), the Accelerator's class and mixed
precision, the process count and a checksum of the final weights.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tiny  # noqa: E402


def main(out: str) -> None:
    import torch
    from transformers import Trainer

    data = tiny.lm_dataset()
    trainer = Trainer(
        model=tiny.gpt2(),
        args=tiny.training_args(
            out, gradient_accumulation_steps=2, eval_strategy="epoch", per_device_train_batch_size=2
        ),
        train_dataset=data,
        eval_dataset=data.select(range(16)),
    )
    trainer.train()
    accelerator = trainer.accelerator
    checksum = float(sum(p.detach().double().sum() for p in trainer.model.parameters()))
    gathered = accelerator.gather(torch.tensor([checksum], dtype=torch.float64))
    assert torch.all(gathered == gathered[0]), f"ranks disagree on the weights: {gathered}"
    if accelerator.is_main_process:
        result = {
            "accelerator": f"{type(accelerator).__module__}.{type(accelerator).__name__}",
            "mixed_precision": accelerator.mixed_precision,
            "args_mixed_precision": trainer.args.mixed_precision,
            "num_processes": accelerator.num_processes,
            "distributed_type": str(accelerator.distributed_type),
            "steps": trainer.state.global_step,
            "losses": tiny.losses(trainer),
            "eval_losses": [h["eval_loss"] for h in trainer.state.log_history if "eval_loss" in h],
            "checksum": checksum,
        }
        Path(out, "result.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
