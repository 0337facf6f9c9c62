"""Accelerate's FSDP checkpoint functions (what transformers' Trainer calls) on real processes.

``roundtrip``: save_fsdp_model / save_fsdp_optimizer, then load_fsdp_model /
load_fsdp_optimizer into a differently initialised model, for FSDP2 and FSDP1 and every
state dict type: the weights come back, and one more step matches the run that went on.
``adapter``: ``adapter_only=True`` with a PEFT LoRA model writes PEFT's adapter entries only
and loads them back without touching the base weights (FULL, SHARDED with DCP and with
per-process files); loaded into a model whose adapter is on other layers, the result names
the model's adapter entries as missing and the checkpoint's as unexpected, and no weight changes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from accel import Accelerator, FullyShardedDataParallelPlugin
from accel.state import AcceleratorState, GradientState
from accelerate.utils import (
    load_fsdp_model,
    load_fsdp_optimizer,
    save_fsdp_model,
    save_fsdp_optimizer,
)


class Block(torch.nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x):
        return x + torch.tanh(self.fc(x))


class Net(torch.nn.Module):
    _no_split_modules = ["Block"]

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(2))
        self.out = torch.nn.Linear(8, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.out(x)


def fresh(**plugin_kwargs) -> Accelerator:
    AcceleratorState._reset_state()
    GradientState._reset_state()
    return Accelerator(fsdp_plugin=FullyShardedDataParallelPlugin(**plugin_kwargs))


def step(acc: Accelerator, model, opt, seed: int) -> None:
    g = torch.Generator().manual_seed(seed + acc.process_index)
    x = torch.randn(4, 8, generator=g)
    acc.backward(model(x).pow(2).mean())
    opt.step()
    opt.zero_grad()


def full(acc: Accelerator, model) -> dict:
    """The full weights, copied (with one process they share storage with the model)."""
    return {k: v.clone() for k, v in acc.get_state_dict(model).items()}


def same(a: dict, b: dict, label: str, atol: float = 0.0) -> None:
    assert set(a) == set(b), f"{label}: keys {sorted(set(a) ^ set(b))}"
    for key in a:
        assert torch.allclose(a[key], b[key], atol=atol, rtol=0), (
            f"{label}: {key} differs by {(a[key] - b[key]).abs().max()}"
        )


def expected_files(kind: str, use_dcp: bool, world: int) -> set[str]:
    if kind == "FULL_STATE_DICT":
        return {"pytorch_model_fsdp.bin", "optimizer.bin"}
    if kind == "LOCAL_STATE_DICT":
        return {f"pytorch_model_fsdp_rank{r}.bin" for r in range(world)} | {"optimizer_0"}
    if use_dcp:
        return {"pytorch_model_fsdp_0", "optimizer_0"}
    return {f"pytorch_model_fsdp_0_rank{r}.bin" for r in range(world)} | {
        f"optimizer_0_rank{r}.bin" for r in range(world)
    }


def check_roundtrip(folder: Path) -> None:
    cases = [
        (2, "FULL_STATE_DICT", True),
        (2, "SHARDED_STATE_DICT", True),
        (2, "SHARDED_STATE_DICT", False),
        (1, "FULL_STATE_DICT", True),
        (1, "SHARDED_STATE_DICT", True),
        (1, "LOCAL_STATE_DICT", True),
    ]
    for version, kind, use_dcp in cases:
        label = f"FSDP{version} {kind} use_dcp={use_dcp}"
        acc = fresh(fsdp_version=version, state_dict_type=kind)
        torch.manual_seed(0)
        model = Net()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        model, opt = acc.prepare(model, opt)
        step(acc, model, opt, 1)
        saved = full(acc, model)
        target = folder / f"{version}-{kind}-{use_dcp}"
        plugin = acc.state.fsdp_plugin
        save_fsdp_model(plugin, acc, model, target, use_dcp=use_dcp)
        save_fsdp_optimizer(plugin, acc, opt, model, target, use_dcp=use_dcp)
        files = set(os.listdir(target))
        assert files == expected_files(kind, use_dcp, acc.num_processes), f"{label}: {files}"
        step(acc, model, opt, 2)
        went_on = full(acc, model)

        acc = fresh(fsdp_version=version, state_dict_type=kind)
        torch.manual_seed(1)  # other weights: the load must replace them all
        model = Net()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        model, opt = acc.prepare(model, opt)
        plugin = acc.state.fsdp_plugin
        result = load_fsdp_model(plugin, acc, model, target, use_dcp=use_dcp)
        assert not result.missing_keys and not result.unexpected_keys, f"{label}: {result}"
        load_fsdp_optimizer(plugin, acc, opt, model, target, use_dcp=use_dcp)
        loaded = full(acc, model)
        if acc.is_main_process:
            same(loaded, saved, f"{label} loaded")
        step(acc, model, opt, 2)  # AdamW's moments came back too: the same step as the run
        resumed = full(acc, model)
        if acc.is_main_process:
            same(resumed, went_on, f"{label} resumed", atol=1e-6)


def peft_model(lora_seed: int, targets: tuple[str, ...] = ("fc",)):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)  # the same base weights every time
    base = Net()
    torch.manual_seed(lora_seed)
    config = LoraConfig(r=2, target_modules=list(targets), init_lora_weights=False)
    return get_peft_model(base, config)


def check_adapter(folder: Path) -> None:
    adapter_names = {
        f"base_model.model.blocks.{i}.fc.lora_{ab}.weight" for i in (0, 1) for ab in "AB"
    }
    out_names = {f"base_model.model.out.lora_{ab}.weight" for ab in "AB"}
    cases = [
        (version, kind, use_dcp)
        for version in (2, 1)
        for kind, use_dcp in (
            ("FULL_STATE_DICT", True),
            ("SHARDED_STATE_DICT", True),
            ("SHARDED_STATE_DICT", False),
        )
    ]
    for version, kind, use_dcp in cases:
        label = f"FSDP{version} {kind} use_dcp={use_dcp} adapter_only"
        acc = fresh(fsdp_version=version, state_dict_type=kind)
        model = peft_model(1)
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        model, opt = acc.prepare(model, opt)
        step(acc, model, opt, 1)
        saved = full(acc, model)
        target = folder / f"adapter-{version}-{kind}-{use_dcp}"
        plugin = acc.state.fsdp_plugin
        save_fsdp_model(plugin, acc, model, target, adapter_only=True, use_dcp=use_dcp)
        save_fsdp_optimizer(plugin, acc, opt, model, target, use_dcp=use_dcp)
        if kind == "FULL_STATE_DICT":
            written = torch.load(target / "pytorch_model_fsdp.bin", weights_only=True)
            assert set(written) == adapter_names, f"{label}: {sorted(written)}"
            for name, value in written.items():
                key = name.replace(".weight", ".default.weight")
                if acc.is_main_process:
                    assert torch.equal(value, saved[key]), f"{label}: {name}"
        elif use_dcp:
            from accel_fsdp.merge import load_dcp_state_dict

            written = load_dcp_state_dict(target / "pytorch_model_fsdp_0")["model"]
            assert set(written) == adapter_names, f"{label}: {sorted(written)}"
        else:
            from accel.checkpoint.layout import read_object

            written = read_object(target / f"pytorch_model_fsdp_0_rank{acc.process_index}.bin")
            assert set(written) == adapter_names, f"{label}: {sorted(written)}"

        acc = fresh(fsdp_version=version, state_dict_type=kind)
        model = peft_model(2)  # same base, other adapter weights
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        model, opt = acc.prepare(model, opt)
        before = full(acc, model)
        plugin = acc.state.fsdp_plugin
        result = load_fsdp_model(plugin, acc, model, target, adapter_only=True, use_dcp=use_dcp)
        assert not result.missing_keys and not result.unexpected_keys, f"{label}: {result}"
        load_fsdp_optimizer(plugin, acc, opt, model, target, adapter_only=True, use_dcp=use_dcp)
        loaded = full(acc, model)
        if acc.is_main_process:
            same(loaded, saved, f"{label} loaded")
            lora = [k for k in saved if "lora_" in k]
            assert len(lora) == 4 and all(not torch.equal(before[k], saved[k]) for k in lora)

        # An adapter on other layers: the checkpoint's entries are unexpected, the model's own
        # are missing (and keep their values). FULL_STATE_DICT reads on the main process only.
        acc = fresh(fsdp_version=version, state_dict_type=kind)
        model = peft_model(3, targets=("out",))
        model = acc.prepare(model)
        before = full(acc, model)
        plugin = acc.state.fsdp_plugin
        result = load_fsdp_model(plugin, acc, model, target, adapter_only=True, use_dcp=use_dcp)
        if acc.is_main_process or kind != "FULL_STATE_DICT":
            assert result.missing_keys == sorted(out_names), f"{label} other layers: {result}"
            assert result.unexpected_keys == sorted(adapter_names), (
                f"{label} other layers: {result}"
            )
        after = full(acc, model)
        if acc.is_main_process:
            same(after, before, f"{label} other layers")


def check_trainer(folder: Path) -> None:
    """transformers' Trainer with ``fsdp="full_shard auto_wrap"``: it builds the plugin from
    ``fsdp_config``, saves its checkpoint with save_fsdp_* and resumes with load_fsdp_*."""
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    config = LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=16,
    )
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 32, (16, 8), generator=g)
    data = [{"input_ids": row, "labels": row} for row in ids]
    for kind in ("FULL_STATE_DICT", "SHARDED_STATE_DICT"):
        out = folder / f"trainer-{kind}"

        def args(steps: int, out: Path = out, kind: str = kind) -> TrainingArguments:
            return TrainingArguments(
                output_dir=str(out),
                fsdp="full_shard auto_wrap",
                fsdp_config={
                    "transformer_layer_cls_to_wrap": ["LlamaDecoderLayer"],
                    "state_dict_type": kind,
                },
                max_steps=steps,
                save_steps=2,
                per_device_train_batch_size=2,
                learning_rate=1e-2,
                report_to=[],
                use_cpu=True,
                save_only_model=False,
                seed=0,
            )

        torch.manual_seed(0)
        trainer = Trainer(model=LlamaForCausalLM(config), args=args(2), train_dataset=data)
        plugin = trainer.accelerator.state.fsdp_plugin
        assert plugin.fsdp_version == 2 and plugin.state_dict_type == kind, plugin
        assert plugin.transformer_cls_names_to_wrap == ["LlamaDecoderLayer"], plugin
        trainer.train()
        checkpoint = out / "checkpoint-2"
        files = set(os.listdir(checkpoint))
        wanted = (
            {"pytorch_model_fsdp.bin", "optimizer.bin"}
            if kind == "FULL_STATE_DICT"
            else {"pytorch_model_fsdp_0", "optimizer_0"}
        )
        assert wanted <= files, f"{kind}: {sorted(files)}"
        trained = full(trainer.accelerator, trainer.model)
        torch.manual_seed(1)
        trainer = Trainer(model=LlamaForCausalLM(config), args=args(2), train_dataset=data)
        trainer.train(resume_from_checkpoint=str(checkpoint))  # loads, then no step is left
        resumed = full(trainer.accelerator, trainer.model)
        if trainer.accelerator.is_main_process:
            same(resumed, trained, f"Trainer {kind} resumed")


if __name__ == "__main__":
    folder = Path(sys.argv[2])
    checks = {"roundtrip": check_roundtrip, "adapter": check_adapter, "trainer": check_trainer}
    for name in sys.argv[1].split(","):
        checks[name](folder)
        if not dist.is_initialized() or dist.get_rank() == 0:
            print(f"ok {name}", flush=True)
