"""transformers' Trainer with ``TrainingArguments(deepspeed=<ZeRO-2 dict with "auto" values>)``.

Run on 2 CPU processes (``accel launch --cpu --num_processes 2``, DS_ACCELERATOR=cpu):
trains a tiny randomly initialised GPT-2 (built locally, nothing from the Hub) on an
in-memory dataset, saves a checkpoint, resumes from it in a second Trainer, and checks
that the losses are finite and go down, that every "auto" was filled, and that both
ranks hold identical weights. Prints ``ok <check>`` lines for the test to assert.

Usage: ``trainer_zero2.py OUTPUT_DIR [--from-launcher]``. With ``--from-launcher`` the
TrainingArguments get no ``deepspeed=``: DeepSpeed comes from ``accel launch --use_deepspeed
--zero_stage 2`` (``ACCELERATE_USE_DEEPSPEED``), the Trainer fills the launched plugin's
"auto" values and builds its own torch AdamW and scheduler.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, set_seed

VOCAB, LENGTH, SAMPLES = 32, 16, 16  # 2 ranks x 2 micro-batches x 4: one step per epoch
MAX_STEPS, SAVE_AT = 6, 4

DS_CONFIG = {
    "fp16": {"enabled": "auto"},
    "bf16": {"enabled": "auto"},
    "optimizer": {
        "type": "AdamW",
        "params": {
            "lr": "auto",
            "betas": "auto",
            "eps": "auto",
            "weight_decay": "auto",
            "torch_adam": True,  # torch's AdamW: no FusedAdam op to JIT-build on the CPU
        },
    },
    "scheduler": {
        "type": "WarmupDecayLR",
        "params": {
            "warmup_min_lr": "auto",
            "warmup_max_lr": "auto",
            "warmup_num_steps": "auto",
            "total_num_steps": "auto",
        },
    },
    "zero_optimization": {
        "stage": 2,
        "allgather_partitions": True,
        "allgather_bucket_size": 2e8,
        "overlap_comm": False,
        "reduce_scatter": True,
        "reduce_bucket_size": "auto",
        "contiguous_gradients": True,
    },
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
}


class CountingDataset(torch.utils.data.Dataset):
    """Sequences ``s, s+1, s+2, ... (mod VOCAB)``: a next-token rule a tiny model learns in a few steps."""

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        ids = (torch.arange(LENGTH) + index * 7) % VOCAB
        labels = ids.clone()
        # the first label is never scored (labels are shifted): -100 makes the Trainer's token
        # count (labels != -100) the number of tokens the loss averages over
        labels[0] = -100
        return {"input_ids": ids, "labels": labels}


def model() -> GPT2LMHeadModel:
    set_seed(0)
    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=LENGTH,
        n_embd=32,
        n_layer=2,
        n_head=2,
        n_inner=64,
        resid_pdrop=0.0,  # no dropout: step 1's gradient is compared with a reference
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2LMHeadModel(config)


FROM_LAUNCHER = "--from-launcher" in sys.argv


def arguments(out: Path, max_steps: int) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(out),
        deepspeed=None if FROM_LAUNCHER else DS_CONFIG,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        max_steps=max_steps,
        learning_rate=5e-3,
        warmup_steps=1,
        weight_decay=0.01,
        max_grad_norm=1.0,
        logging_steps=1,
        save_strategy="steps",
        save_steps=SAVE_AT,
        report_to=[],
        seed=0,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


def flat_weights(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().float().flatten() for p in module.parameters()])


def same_on_all_ranks(tensor: torch.Tensor) -> bool:
    gathered = [torch.zeros_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, tensor)
    return all(torch.equal(gathered[0], t) for t in gathered[1:])


def first_step_grad_norm() -> float:
    """The gradient norm of step 1 as Accelerate + DeepSpeed give it: that of the mean token loss
    over the whole dataset (one step = every sample; equal lengths, so every token weighs the same).
    A loss divided twice for gradient accumulation would give half of it."""
    reference = model()
    samples = [CountingDataset()[i] for i in range(SAMPLES)]
    ids = torch.stack([s["input_ids"] for s in samples])
    labels = torch.stack([s["labels"] for s in samples])
    reference(input_ids=ids, labels=labels).loss.backward()
    return torch.cat([p.grad.flatten() for p in reference.parameters()]).norm().item()


def main() -> None:
    out = Path(sys.argv[1])
    initial = flat_weights(model())
    expected_norm = first_step_grad_norm()
    trainer = Trainer(
        model=model(), args=arguments(out, MAX_STEPS), train_dataset=CountingDataset()
    )
    assert trainer.is_deepspeed_enabled and trainer.accelerator.distributed_type == "DEEPSPEED"
    trainer.train()
    rank = dist.get_rank()

    engine = trainer.model_wrapped
    assert engine.zero_optimization_stage() == 2, engine.zero_optimization_stage()
    plugin = trainer.accelerator.state.deepspeed_plugin
    config = plugin.deepspeed_config
    assert config is plugin.hf_ds_config.config, "the plugin's dict is not its hf_ds_config's"
    if not FROM_LAUNCHER:  # the Trainer's HfTrainerDeepSpeedConfig is the plugin's, kept whole
        assert plugin.hf_ds_config is trainer.args.hf_deepspeed_config, plugin.hf_ds_config
    assert "auto" not in json.dumps(engine.config), (
        f"auto left in the engine's config: {engine.config}"
    )
    expected = {
        "train_micro_batch_size_per_gpu": 4,
        "gradient_accumulation_steps": 2,
        "train_batch_size": 4 * 2 * dist.get_world_size(),
        "gradient_clipping": 1.0,
    }
    assert all(config[k] == v for k, v in expected.items()), config
    if not FROM_LAUNCHER:
        assert config["optimizer"]["params"]["lr"] == 5e-3, config["optimizer"]
        assert config["scheduler"]["params"]["total_num_steps"] == MAX_STEPS, config["scheduler"]
        assert config["zero_optimization"]["reduce_bucket_size"] == 32 * 32, config
    assert (
        engine.gradient_accumulation_steps() == 2 and engine.train_micro_batch_size_per_gpu() == 4
    )
    print(f"rank{rank} ok auto-filled", flush=True)

    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == MAX_STEPS and all(math.isfinite(x) for x in losses), losses
    assert losses[-1] < losses[0] - 0.1, f"loss did not go down: {losses}"
    assert trainer.state.global_step == MAX_STEPS
    print(f"rank{rank} ok loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)
    norm = trainer.state.log_history[0]["grad_norm"]
    assert abs(norm - expected_norm) < 1e-3 * expected_norm, (norm, expected_norm)
    print(f"rank{rank} ok grad norm {norm:.5f} (reference {expected_norm:.5f})", flush=True)

    weights = flat_weights(engine.module)
    assert not torch.equal(weights, initial), "the weights did not change"
    assert same_on_all_ranks(weights), "the ranks ended with different weights"
    print(f"rank{rank} ok same weights", flush=True)

    checkpoint = out / f"checkpoint-{SAVE_AT}"
    if rank == 0:
        found = sorted(p.name for p in checkpoint.iterdir())
        assert (checkpoint / f"global_step{SAVE_AT}").is_dir(), found
        assert (checkpoint / "model.safetensors").is_file(), found
        assert (checkpoint / "trainer_state.json").is_file(), found
        print(f"rank{rank} ok checkpoint {found}", flush=True)
    trainer.save_model(str(out / "final"))
    trainer.accelerator.wait_for_everyone()
    if rank == 0:
        from safetensors.torch import load_file

        saved = load_file(str(out / "final" / "model.safetensors"))
        inner = engine.module.state_dict()
        assert all(torch.equal(saved[k], inner[k]) for k in saved), "saved weights differ"
        print(f"rank{rank} ok save_model", flush=True)

    # resume from the step-4 checkpoint: DeepSpeed restores the model, optimizer and scheduler
    resumed = Trainer(
        model=model(), args=arguments(out / "resumed", MAX_STEPS), train_dataset=CountingDataset()
    )
    resumed.train(resume_from_checkpoint=str(checkpoint))
    again = [e["loss"] for e in resumed.state.log_history if "loss" in e][-(MAX_STEPS - SAVE_AT) :]
    assert resumed.state.global_step == MAX_STEPS
    assert all(abs(a - b) < 1e-4 for a, b in zip(again, losses[SAVE_AT:])), (again, losses)
    assert torch.allclose(flat_weights(resumed.model_wrapped.module), weights, atol=1e-5)
    print(f"rank{rank} ok resume {again}", flush=True)


if __name__ == "__main__":
    main()
