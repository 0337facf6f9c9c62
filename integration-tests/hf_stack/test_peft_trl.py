"""PEFT LoRA with an ``Accelerator`` loop and with ``Trainer``; TRL's ``SFTTrainer``: on accel."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import accel  # noqa: E402
import accelerate  # noqa: E402, F401  (the workspace always has the compat distribution: never a skip)

peft = pytest.importorskip("peft")
import tiny  # noqa: E402


def _lora(model):
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], lora_dropout=0.0)
    return peft.get_peft_model(model, config)


def test_lora_with_an_accelerator_loop(tmp_path):
    import torch
    from accel import Accelerator
    from accel.utils import is_peft_model

    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=2)
    model = _lora(tiny.gpt2())
    assert is_peft_model(model)
    frozen = {k: v.clone() for k, v in model.named_parameters() if not v.requires_grad}
    data = tiny.lm_dataset(rows=32).with_format("torch")
    loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    losses = []
    for _ in range(3):
        for batch in loader:
            with accelerator.accumulate(model):
                loss = model(input_ids=batch["input_ids"], labels=batch["labels"]).loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            losses.append(loss.item())
    assert sum(losses[-8:]) < sum(losses[:8])
    unwrapped = accelerator.unwrap_model(model)
    for name, value in unwrapped.named_parameters():
        if name in frozen:
            assert torch.equal(value, frozen[name]), f"{name} is frozen but changed"
    accelerator.save_state(tmp_path / "state")
    unwrapped.save_pretrained(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
    reloaded = peft.PeftModel.from_pretrained(tiny.gpt2(), tmp_path / "adapter")
    ids = torch.randint(0, tiny.VOCAB, (2, 8))
    unwrapped.eval()
    reloaded.eval()
    torch.testing.assert_close(reloaded(input_ids=ids).logits, unwrapped(input_ids=ids).logits)


def test_lora_with_trainer(tmp_path):
    import torch
    from transformers import Trainer

    model = _lora(tiny.gpt2())
    before = {k: v.clone() for k, v in model.named_parameters() if v.requires_grad}
    trainer = Trainer(
        model=model,
        args=tiny.training_args(str(tmp_path), learning_rate=1e-2, save_strategy="epoch"),
        train_dataset=tiny.lm_dataset(rows=16),
    )
    trainer.train()
    assert trainer.state.global_step == 8
    changed = [
        k
        for k, v in trainer.model.named_parameters()
        if v.requires_grad and not torch.equal(v, before[k])
    ]
    assert changed and all("lora_" in k for k in changed)
    checkpoint = tmp_path / "checkpoint-8"
    assert (checkpoint / "adapter_model.safetensors").is_file()


def test_trl_sft_trainer(tmp_path):
    trl = pytest.importorskip("trl")

    tokenizer = tiny.tokenizer()
    config = trl.SFTConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_train_epochs=2,
        max_length=16,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        save_strategy="no",
        learning_rate=5e-3,
        seed=42,
        dataset_num_proc=None,
    )
    model = tiny.gpt2()
    trainer = trl.SFTTrainer(
        model=model,
        args=config,
        train_dataset=tiny.text_dataset(rows=32),
        processing_class=tokenizer,
    )
    trainer.train()
    assert type(trainer.accelerator).__module__ == "accelerate.compat_accelerator"
    assert isinstance(trainer.accelerator, accel.Accelerator)
    assert trainer.state.global_step == 16
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert logged[-1] < logged[0]
