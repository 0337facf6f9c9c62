"""transformers' Trainer with accel's automatic micro-batching, and ``auto_find_batch_size`` untouched.

The model raises the CPU allocator's out-of-memory error on batches of more than 4 rows.
``auto_find_batch_size=True`` keeps Accelerate's behaviour (the Trainer restarts with a batch
0.9 times smaller until it fits: the global batch changes); the documented Trainer subclass
whose ``training_step`` goes through ``accelerator.train_step`` keeps the batch of 8, splits it
into 2 micro-batches of 4, and ends with the weights of a run that never ran out of memory.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import accelerate  # noqa: E402, F401  (the workspace always has the compat distribution)

pytest.importorskip("transformers")
import tiny  # noqa: E402

OOM = "[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes."


def _model(limit: int | None):
    import torch

    model = tiny.gpt2()
    for module in model.modules():  # no dropout: the runs draw no random numbers
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    if limit is not None:
        forward = model.forward

        @functools.wraps(forward)  # the Trainer keeps the dataset columns forward's signature names
        def limited(*args, **kwargs):
            ids = kwargs.get("input_ids", args[0] if args else None)
            if ids is not None and ids.shape[0] > limit:
                raise RuntimeError(OOM)
            return forward(*args, **kwargs)

        model.forward = limited
    return model


def _trainer(tmp_path, model, trainer_class=None, **overrides):
    from transformers import Trainer

    args = tiny.training_args(
        str(tmp_path), per_device_train_batch_size=8, max_steps=3, **overrides
    )
    return (trainer_class or Trainer)(model=model, args=args, train_dataset=tiny.lm_dataset())


def _flat(model):
    import torch

    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def test_trainer_micro_batching_and_auto_find_batch_size(tmp_path):
    from transformers import Trainer

    class MicroBatchingTrainer(Trainer):  # as in docs/fitting-the-machine.md
        def training_step(self, model, inputs, num_items_in_batch=None):
            step = super().training_step
            return self.accelerator.train_step(
                lambda micro: step(model, micro, num_items_in_batch),
                inputs,
                model,
                reduction="sum" if num_items_in_batch is not None else "mean",
            )

    plain = _trainer(tmp_path / "plain", _model(None))
    plain.train()

    micro = _trainer(tmp_path / "micro", _model(4), MicroBatchingTrainer)
    micro.train()
    assert micro.accelerator.micro_batching.micro_batch_size == 4
    assert micro._train_batch_size == 8  # the batch, and so the learning dynamics, unchanged
    reference = _flat(plain.model)
    difference = (_flat(micro.model) - reference).abs().max() / reference.abs().max()
    assert difference <= 1e-6, difference
    assert [h["loss"] for h in micro.state.log_history if "loss" in h] == pytest.approx(
        [h["loss"] for h in plain.state.log_history if "loss" in h], rel=1e-5
    )

    found = _trainer(tmp_path / "found", _model(4), auto_find_batch_size=True)
    found.train()
    assert found._train_batch_size == 4  # Accelerate's find_executable_batch_size: 8, 7, 6, 5, 4
    assert found.state.global_step == 3
