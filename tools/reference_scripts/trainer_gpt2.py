"""transformers' ``Trainer`` on the tiny GPT-2 of integration-tests/hf_stack/tiny.py: every
step's loss and gradient norm, and the evaluation losses.

    python trainer_gpt2.py --output trainer.json                            # 1 process
    accelerate launch --multi_gpu --num_processes 2 trainer_gpt2.py --output trainer.json

transformers imports ``accelerate``: the real one in the reference venv, accel's compat
distribution in the workspace. Equal numbers mean the same data order, the same dropout masks
(the global generator is used the same way) and the same gradient accumulation and clipping.
Cases: ``seedable`` (Trainer's default ``use_seedable_sampler=True``), ``sampler`` (the
DataLoader's own ``RandomSampler``), ``data_seed`` (a sampler seed apart from the model seed).
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


def _train(**overrides: Any) -> dict[str, Any]:
    from transformers import Trainer

    data = tiny.lm_dataset()
    with tempfile.TemporaryDirectory() as out:
        trainer = Trainer(
            model=tiny.gpt2(),
            args=tiny.training_args(
                out,
                per_device_train_batch_size=2,
                gradient_accumulation_steps=2,
                num_train_epochs=3,
                eval_strategy="epoch",
                **overrides,
            ),
            train_dataset=data,
            eval_dataset=data.select(range(16)),
        )
        trainer.train()
    return {
        "losses": [list(pair) for pair in tiny.losses(trainer)],
        "eval_losses": [h["eval_loss"] for h in trainer.state.log_history if "eval_loss" in h],
    }


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    run_cases(
        "trainer_gpt2.py",
        {
            "seedable": _train,
            "sampler": lambda: _train(accelerator_config={"use_seedable_sampler": False}),
            "data_seed": lambda: _train(data_seed=7),
        },
        args,
    )


if __name__ == "__main__":
    main()
