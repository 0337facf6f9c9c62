"""accel-deepspeed on 2 real gloo processes (DS_ACCELERATOR=cpu): parity with DDP, state dicts, checkpoints.

Usage: ``ds_checks.py <phase> <folder>``, phase ``train`` (parity for ZeRO 0-3 and
offload, auto log, 16-bit gather, zero3 init, two engines, save_state mid-run) or
``resume`` (new processes: load_state, continue, compare; fp32 recovery).
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
import types
from pathlib import Path

import torch
from accel import Accelerator, DeepSpeedPlugin
from accel.state import AcceleratorState, GradientState
from accel.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset

STEPS = 8  # micro-batches; gradient accumulation 2 -> 4 optimizer steps
SAVE_AT = 4
GA = 2


CASES = [
    ("zero0", dict(zero_stage=0)),
    ("zero1", dict(zero_stage=1, gradient_clipping=None)),  # auto clipping: default 1.0
    ("zero2", dict(zero_stage=2)),
    ("zero3", dict(zero_stage=3, zero3_save_16bit_model=True)),
    ("zero2-offload", dict(zero_stage=2, offload_optimizer_device="cpu")),
    ("zero2-bf16", dict(zero_stage=2)),  # DeepSpeed's bf16 from mixed_precision="bf16"
    (
        "zero3-offload",
        dict(
            zero_stage=3,
            offload_optimizer_device="cpu",
            offload_param_device="cpu",
            zero3_init_flag=True,
        ),
    ),
]
"""(name, DeepSpeedPlugin arguments) of each case trained against DDP."""
RESUMED = ("zero2", "zero3")
"""Cases saved mid-run, then resumed by new processes."""


class Net(torch.nn.Module):
    """A tiny model with a Hugging Face-like ``config.hidden_size`` (for the bucket-size autos)."""

    def __init__(self):
        super().__init__()
        self.config = types.SimpleNamespace(hidden_size=16)
        self.inp = torch.nn.Linear(6, 16)
        self.mid = torch.nn.Linear(16, 16)
        self.out = torch.nn.Linear(16, 1)

    def forward(self, x):
        x = x.to(self.inp.weight.dtype)
        return self.out(torch.tanh(self.mid(torch.tanh(self.inp(x)))))


def data() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 6, generator=g)
    return TensorDataset(x, x.sum(dim=1, keepdim=True).sin())


def fresh(plugin: DeepSpeedPlugin | None = None, precision: str = "no") -> Accelerator:
    AcceleratorState._reset_state()
    GradientState._reset_state()
    return Accelerator(
        gradient_accumulation_steps=GA, deepspeed_plugin=plugin, mixed_precision=precision
    )


def build(acc: Accelerator, plugin: DeepSpeedPlugin | None = None):
    set_seed(0)
    if plugin is not None and plugin.zero3_init_flag:
        import deepspeed

        weights = Net().state_dict()  # "pretrained" weights, loaded into the partitioned model
        with plugin.zero3_init_context_manager():
            model = Net()
        params = list(model.parameters())
        assert all(p.numel() == 0 and hasattr(p, "ds_id") for p in params), "not partitioned"
        assert {p.ds_tensor.dtype for p in params} == {torch.float32}
        with deepspeed.zero.GatheredParameters(params, modifier_rank=0):
            model.load_state_dict(weights)
    else:
        model = Net()
    set_seed(1)  # the shuffling seed prepare() draws does not depend on how the model was built
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    dl = DataLoader(data(), batch_size=4, shuffle=True)
    return acc.prepare(model, opt, dl)


def run(acc, model, opt, dl, start: int, stop: int, save_to: Path | None = None) -> list[float]:
    losses = []
    for step, (x, y) in enumerate(itertools.islice(dl, stop - start), start=start):
        with acc.accumulate(model):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
            acc.backward(loss)
            if acc.sync_gradients:
                acc.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
        losses.append(acc.reduce(loss.detach(), "mean").item())
        if save_to is not None and step + 1 == SAVE_AT:
            acc.save_state(save_to)
    return losses


def close(a: list[float], b: list[float], tol: float, what: str) -> None:
    assert len(a) == len(b) and all(abs(x - y) <= tol * max(1.0, abs(y)) for x, y in zip(a, b)), (
        f"{what}: losses {a} vs {b}"
    )


def same_state(got: dict, want: dict, tol: float, what: str) -> None:
    assert set(got) == set(want), f"{what}: keys {sorted(got)} vs {sorted(want)}"
    for key, value in want.items():
        assert torch.allclose(got[key].float(), value.float(), atol=tol), f"{what}: {key} differs"


def check_train(folder: Path) -> None:
    acc = fresh()  # distributed_type MULTI_CPU: the accel-ddp backend
    assert acc.backend.name != "deepspeed"
    model, opt, dl = build(acc)
    ref_losses = run(acc, model, opt, dl, 0, STEPS)
    ref_state = {k: v.detach().clone() for k, v in acc.get_state_dict(model).items()}
    main = acc.is_main_process
    if main:
        torch.save(ref_state, folder / "ddp_final.pt")

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("accel_deepspeed.auto").addHandler(handler)
    logging.getLogger("accel_deepspeed.auto").setLevel(logging.INFO)

    only = os.environ.get("DS_CHECKS_ONLY")  # a comma-separated subset of the cases, to debug
    for name, kwargs in CASES:
        if only and name not in only.split(","):
            continue
        records.clear()
        plugin = DeepSpeedPlugin(**{"gradient_clipping": 1.0, **kwargs})
        bf16 = name.endswith("bf16")
        acc = fresh(plugin, "bf16" if bf16 else "no")
        assert acc.backend.name == "deepspeed" and acc.distributed_type == "DEEPSPEED"
        model, opt, dl = build(acc, plugin)
        save_to = folder / f"ckpt-{name}" if name in RESUMED else None
        losses = run(acc, model, opt, dl, 0, STEPS, save_to)
        close(losses, ref_losses, 3e-2 if bf16 else 2e-4, name)
        engine = acc.backend.engine_of(model)
        assert engine.zero_optimization_stage() == kwargs["zero_stage"], name
        assert engine.train_micro_batch_size_per_gpu() == 4
        assert engine.gradient_accumulation_steps() == GA
        assert engine.train_batch_size() == 4 * GA * acc.num_processes
        assert acc.unwrap_model(model) is engine.module
        state = acc.get_state_dict(model)
        if name == "zero3":  # the 16-bit consolidated state dict: complete on the main process only
            assert (len(state) > 0) == main, "16-bit gather goes to the main process"
        if state:
            same_state(state, ref_state, 3e-2 if bf16 else 2e-4, name)
        filled = {f.key: f.source for f in acc.backend.filled[0]}
        assert engine.bfloat16_enabled() == bf16
        if bf16:
            assert filled["bf16.enabled"] == "mixed_precision='bf16'", filled
        else:
            assert "bf16.enabled" not in filled, filled
        assert "data loader" in filled["train_micro_batch_size_per_gpu"], filled
        assert "Accelerator" in filled["gradient_accumulation_steps"], filled
        assert "x 2 processes" in filled["train_batch_size"], filled
        if kwargs.get("gradient_clipping", 1.0) is None:
            assert filled["gradient_clipping"].startswith("default 1.0"), filled
        else:
            assert "gradient_clipping" not in filled, filled
        logged = "\n".join(r.getMessage() for r in records)
        assert "train_micro_batch_size_per_gpu = 4 (auto: the data loader's batch_size 4)" in logged
        if name in RESUMED and main:
            torch.save({"losses": losses, "state": state}, folder / f"{name}-run.pt")
        if name == "zero3-offload":
            assert type(
                engine.optimizer.optimizer
            ).__name__ == "DeepSpeedCPUAdam" or "CPUAdam" in repr(type(engine.optimizer)), type(
                engine.optimizer
            )
        print(f"ok {name}", flush=True)

    # two models, each with its own engine; backward names the model
    plugin = DeepSpeedPlugin(zero_stage=2, gradient_clipping=1.0)
    acc = fresh(plugin)
    set_seed(0)
    a, b = Net(), Net()
    oa = torch.optim.SGD(a.parameters(), lr=0.1)
    ob = torch.optim.SGD(b.parameters(), lr=0.1)
    dl = DataLoader(data(), batch_size=4)
    a, oa, b, ob, dl = acc.prepare(a, oa, b, ob, dl)
    assert len(acc.backend.engines) == 2 and a is not b
    before = {k: v.clone() for k, v in acc.get_state_dict(b).items()}
    for x, y in itertools.islice(dl, 2):
        with acc.accumulate(a, b):
            la = torch.nn.functional.mse_loss(a(x), y)
            lb = torch.nn.functional.mse_loss(b(x), y)
            acc.backward(la, model=a)
            acc.backward(lb, model=b)
    after = acc.get_state_dict(b)
    assert any(not torch.equal(before[k], after[k]) for k in before), "model b did not train"
    print("ok two-engines", flush=True)


def check_resume(folder: Path) -> None:
    from accel_deepspeed import get_fp32_state_dict_from_zero_checkpoint

    for name in RESUMED:
        plugin = DeepSpeedPlugin(gradient_clipping=1.0, **dict(CASES)[name])
        acc = fresh(plugin)
        model, opt, dl = build(acc, plugin)
        acc.load_state(folder / f"ckpt-{name}")
        losses = run(acc, model, opt, dl, SAVE_AT, STEPS)
        want = torch.load(folder / f"{name}-run.pt")
        close(losses, want["losses"][SAVE_AT:], 1e-6, f"resumed {name}")
        final = acc.get_state_dict(model)
        if acc.is_main_process:
            same_state(final, want["state"], 1e-6, f"resumed {name}")
            fp32 = get_fp32_state_dict_from_zero_checkpoint(folder / f"ckpt-{name}")
            assert set(fp32) == set(final), sorted(fp32)
            assert all(v.dtype == torch.float32 for v in fp32.values())
        print(f"ok resume {name}", flush=True)


if __name__ == "__main__":
    phase, folder = sys.argv[1], Path(sys.argv[2])
    {"train": check_train, "resume": check_resume}[phase](folder)
