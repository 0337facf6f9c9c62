"""transformers' ``Trainer`` on accel through the compat distribution, one process.

Gradient accumulation, evaluation, checkpoints, and resume mid-epoch (epoch 0 and 1)
ending with the same weights as the uninterrupted run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import accel  # noqa: E402
import accelerate  # noqa: E402, F401  (the workspace always has the compat distribution: never a skip)

pytest.importorskip("transformers")
import tiny  # noqa: E402


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _train(output_dir, resume_from=None, stop_at=None, **overrides):
    from transformers import Trainer, TrainerCallback

    class StopAt(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if stop_at is not None and state.global_step == stop_at:
                control.should_training_stop = True

    data = tiny.lm_dataset()
    trainer = Trainer(
        model=tiny.gpt2(),
        args=tiny.training_args(
            str(output_dir),
            gradient_accumulation_steps=2,
            eval_strategy="steps",
            eval_steps=3,
            save_strategy="steps",
            save_steps=3,
            **overrides,
        ),
        train_dataset=data,
        eval_dataset=data.select(range(16)),
        callbacks=[StopAt()],
    )
    trainer.train(resume_from_checkpoint=resume_from)
    return trainer


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    trainer = _train(tmp_path_factory.mktemp("full"))
    return trainer, _weights(trainer.model)


def test_trains_with_accumulation_evaluation_and_checkpoints(uninterrupted):
    trainer, _ = uninterrupted
    assert type(trainer.accelerator).__module__ == "accelerate.compat_accelerator"
    assert isinstance(trainer.accelerator, accel.Accelerator)
    assert trainer.state.global_step == 12  # 48 rows / (4 x 2) per step x 2 epochs
    logged = tiny.losses(trainer)
    assert len(logged) == 12
    assert logged[-1][0] < logged[0][0]
    evals = [h["eval_loss"] for h in trainer.state.log_history if "eval_loss" in h]
    assert len(evals) == 4
    checkpoints = sorted(p.name for p in Path(trainer.args.output_dir).glob("checkpoint-*"))
    assert checkpoints == [f"checkpoint-{s}" for s in (12, 3, 6, 9)]


@pytest.mark.parametrize("step", [3, 9], ids=["epoch0", "epoch1"])
def test_resume_mid_epoch_ends_with_the_same_weights(uninterrupted, tmp_path, step):
    _, expected = uninterrupted
    first = _train(tmp_path, stop_at=step)
    assert first.state.global_step == step
    resumed = _train(tmp_path, resume_from=str(tmp_path / f"checkpoint-{step}"))
    assert resumed.state.global_step == 12
    got = _weights(resumed.model)
    for name, value in expected.items():
        assert __import__("torch").equal(got[name], value), name
