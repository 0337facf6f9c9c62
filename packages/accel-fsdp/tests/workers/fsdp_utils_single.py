"""One process: Accelerate's FSDP checkpoint functions and extract_model_from_parallel(recursive=True).

Run by tests/test_fsdp_utils.py in a subprocess (FSDP needs a process group, which would
outlive the test in the pytest process).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
from accel import Accelerator, FullyShardedDataParallelPlugin
from accel.state import AcceleratorState, GradientState
from accel.utils import extract_model_from_parallel
from accel.utils.fsdp_utils import (
    load_fsdp_model,
    load_fsdp_optimizer,
    save_fsdp_model,
    save_fsdp_optimizer,
)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return x + self.fc(x)


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


def fresh(**kwargs) -> Accelerator:
    AcceleratorState._reset_state()
    GradientState._reset_state()
    return Accelerator(fsdp_plugin=FullyShardedDataParallelPlugin(**kwargs))


def weights(acc, model) -> dict:
    return {k: v.clone() for k, v in acc.get_state_dict(model).items()}


def check_unwrap() -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    acc = fresh(fsdp_version=1)
    model = acc.prepare(Net())
    assert isinstance(model, FSDP) and isinstance(model.module.blocks[0], FSDP)
    top = extract_model_from_parallel(model)
    assert isinstance(top, Net) and isinstance(top.blocks[0], FSDP)  # only the top wrapper
    inner = extract_model_from_parallel(model, recursive=True)
    assert isinstance(inner, Net)
    assert not any(isinstance(m, FSDP) for m in inner.modules()), inner
    assert isinstance(inner.blocks[1], Block)

    class XlaFullyShardedDataParallel(torch.nn.Module):  # XLA's FSDP wrappers: a .module
        def __init__(self, module):
            super().__init__()
            self.module = module

    plain = Net()
    plain.blocks[0] = XlaFullyShardedDataParallel(plain.blocks[0])
    assert extract_model_from_parallel(plain) is plain
    assert isinstance(extract_model_from_parallel(plain, recursive=True).blocks[0], Block)


def check_roundtrip(folder: Path) -> None:
    for kind, files in (
        ("FULL_STATE_DICT", {"pytorch_model_fsdp.bin", "optimizer.bin"}),
        ("SHARDED_STATE_DICT", {"pytorch_model_fsdp_0", "optimizer_0"}),
    ):
        acc = fresh(fsdp_version=2, state_dict_type=kind)
        torch.manual_seed(0)
        model = Net()
        opt = torch.optim.AdamW(model.parameters(), lr=0.1)
        model, opt = acc.prepare(model, opt)
        x = torch.randn(4, 8)
        acc.backward(model(x).sum())
        opt.step()
        opt.zero_grad()
        saved = weights(acc, model)
        target = folder / kind
        save_fsdp_model(acc.state.fsdp_plugin, acc, model, target)
        save_fsdp_optimizer(acc.state.fsdp_plugin, acc, opt, model, target)
        assert set(os.listdir(target)) == files, sorted(os.listdir(target))
        acc.backward(model(x).sum())
        opt.step()
        went_on = weights(acc, model)

        acc = fresh(fsdp_version=2, state_dict_type=kind)
        torch.manual_seed(1)
        model = Net()
        opt = torch.optim.AdamW(model.parameters(), lr=0.1)
        model, opt = acc.prepare(model, opt)
        load_fsdp_model(acc.state.fsdp_plugin, acc, model, target)
        load_fsdp_optimizer(acc.state.fsdp_plugin, acc, opt, model, target)
        loaded = weights(acc, model)
        assert all(torch.equal(loaded[k], saved[k]) for k in saved), kind
        acc.backward(model(x).sum())
        opt.step()
        resumed = weights(acc, model)
        assert all(torch.allclose(resumed[k], went_on[k], atol=1e-6) for k in saved), kind


def check_adapter(folder: Path) -> None:
    from peft import LoraConfig, get_peft_model

    def lora(seed: int):
        torch.manual_seed(0)
        base = Net()
        torch.manual_seed(seed)
        return get_peft_model(base, LoraConfig(r=2, target_modules=["fc"], init_lora_weights=False))

    acc = fresh(fsdp_version=2, state_dict_type="FULL_STATE_DICT")
    model = acc.prepare(lora(1))
    saved = weights(acc, model)
    save_fsdp_model(acc.state.fsdp_plugin, acc, model, folder, adapter_only=True)
    written = torch.load(folder / "pytorch_model_fsdp.bin", weights_only=True)
    assert sorted(written) == sorted(
        f"base_model.model.blocks.{i}.fc.lora_{ab}.weight" for i in (0, 1) for ab in "AB"
    ), sorted(written)
    acc = fresh(fsdp_version=2, state_dict_type="FULL_STATE_DICT")
    model = acc.prepare(lora(2))
    result = load_fsdp_model(acc.state.fsdp_plugin, acc, model, folder, adapter_only=True)
    assert not result.missing_keys and not result.unexpected_keys, result
    loaded = weights(acc, model)
    assert all(torch.equal(loaded[k], saved[k]) for k in saved)


def check_prepare_twice() -> None:
    """Preparing an FSDP2 model (or its optimizer) again returns it: no second fully_shard."""
    acc = fresh(fsdp_version=2)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    prepared = acc.prepare(model, opt)
    again = acc.prepare(*prepared)
    originals = acc.prepare(model, opt)
    assert all(a is b for a, b in zip((*again, *originals), (*prepared, *prepared)))
    assert acc.prepare_model(model) is prepared[0]
    assert (len(acc.prepared.models), len(acc.prepared.optimizers)) == (1, 1)
    model, opt = prepared
    acc.backward(model(torch.randn(4, 8)).sum())
    opt.step()


if __name__ == "__main__":
    folder = Path(sys.argv[2])
    for name in sys.argv[1].split(","):
        {
            "unwrap": check_unwrap,
            "twice": check_prepare_twice,
            "roundtrip": lambda: check_roundtrip(folder / "roundtrip"),
            "adapter": lambda: check_adapter(folder / "adapter"),
        }[name]()
        print(f"ok {name}", flush=True)
