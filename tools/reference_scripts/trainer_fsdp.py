"""transformers' ``Trainer(fsdp="full_shard")`` on the tiny GPT-2: the log history and the
trained parameters as a user reads them after ``train()``.

    accelerate launch --multi_gpu --num_processes 2 trainer_fsdp.py --output fsdp.json

On CPU processes Accelerate applies FSDP only on accelerator devices: the run is
``MULTI_CPU`` (DDP), ``Trainer.is_fsdp_enabled`` is False, and ``named_parameters()``
gives full tensors. The record holds what a user sees: the distributed type, whether the
Trainer thinks FSDP is on, each parameter's type and its (sum, sum of squares) read
straight from ``trainer.model.named_parameters()``, and the main process's
``accelerator.get_state_dict(model)``. Case: ``full_shard``.
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


def _sums(tensors: dict[str, Any]) -> dict[str, list[float]]:
    """Per tensor: (sum, sum of squares), in float64, rounded past float32's noise."""
    out = {}
    for name, tensor in tensors.items():
        t = tensor.detach().double()
        out[name] = [round(t.sum().item(), 9), round(t.square().sum().item(), 9)]
    return out


def _train() -> dict[str, Any]:
    from transformers import Trainer

    data = tiny.lm_dataset(rows=16)
    with tempfile.TemporaryDirectory() as out:
        args = tiny.training_args(
            out,
            per_device_train_batch_size=2,
            num_train_epochs=1,
            fsdp="full_shard",
            fsdp_config={"transformer_layer_cls_to_wrap": ["GPT2Block"]},
        )
        trainer = Trainer(model=tiny.gpt2(), args=args, train_dataset=data)
        trainer.train()
        params = dict(trainer.model.named_parameters())
        state = trainer.accelerator.get_state_dict(trainer.model)
        main = trainer.accelerator.is_main_process
        seen = {
            "distributed_type": trainer.accelerator.distributed_type.value,
            "is_fsdp_enabled": trainer.is_fsdp_enabled,
            "parameter_types": sorted({type(p).__name__ for p in params.values()}),
        }
    history = [
        [h["loss"], h["grad_norm"], h["learning_rate"]]
        for h in trainer.state.log_history
        if "grad_norm" in h
    ]
    return {
        **seen,
        "history": history,
        "parameters": _sums(params),
        "state_dict": _sums(state) if main else None,
    }


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    run_cases("trainer_fsdp.py", {"full_shard": _train}, args)


if __name__ == "__main__":
    main()
