"""accel-fsdp on real processes: parity with one process, state dicts, every checkpoint type round-trips."""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from accel import Accelerator, FullyShardedDataParallelPlugin
from accel.errors import CheckpointError
from accel.state import AcceleratorState, GradientState
from accel.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset


class Block(torch.nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x):
        return x + torch.tanh(self.fc(x))


class Net(torch.nn.Module):
    _no_split_modules = ["Block"]

    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(6, 16)
        self.blocks = torch.nn.ModuleList(Block(16) for _ in range(3))
        self.out = torch.nn.Linear(16, 1)

    def forward(self, x):
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.out(x)


def data(n: int = 64) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 6, generator=g)
    return TensorDataset(x, x.sum(dim=1, keepdim=True).sin())


def fresh(**plugin_kwargs) -> Accelerator:
    AcceleratorState._reset_state()
    GradientState._reset_state()
    precision = plugin_kwargs.pop("mixed_precision", "no")
    return Accelerator(
        mixed_precision=precision, fsdp_plugin=FullyShardedDataParallelPlugin(**plugin_kwargs)
    )


def reference(steps: int) -> tuple[torch.nn.Module, list[float]]:
    """One process, plain PyTorch, global batch 8."""
    set_seed(0)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for i, (x, y) in enumerate(DataLoader(data(), batch_size=8)):
        if i == steps:
            break
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return model, losses


def train(acc: Accelerator, steps: int, optimizer_after_prepare: bool = False):
    set_seed(0)
    model = Net()
    dl = DataLoader(data(), batch_size=4)
    if optimizer_after_prepare:  # the seed's FSDP pattern
        model = acc.prepare(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        opt, dl = acc.prepare(opt, dl)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        model, opt, dl = acc.prepare(model, opt, dl)
    losses = []
    for x, y in itertools.islice(dl, steps):  # islice: no batch is drawn past the last step
        loss = torch.nn.functional.mse_loss(model(x), y)
        acc.backward(loss)
        acc.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        opt.zero_grad()
        losses.append(acc.reduce(loss.detach(), "mean").item())
    return model, opt, dl, losses


def check_parity() -> None:
    ref_model, ref_losses = reference(6)
    ref_state = ref_model.state_dict()
    for version, strategy, precision in itertools.product(
        [2, 1],
        ["FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"],
        ["no", "bf16"],
    ):
        acc = fresh(fsdp_version=version, sharding_strategy=strategy, mixed_precision=precision)
        model, _, _, losses = train(
            acc, 6, optimizer_after_prepare=(version == 2 and strategy == "NO_SHARD")
        )
        tol = 1e-4 if precision == "no" else 5e-2
        assert all(abs(a - b) <= tol * max(1.0, abs(b)) for a, b in zip(losses, ref_losses)), (
            f"FSDP{version} {strategy} {precision}: losses {losses} vs {ref_losses}"
        )
        full = acc.get_state_dict(model)
        if acc.is_main_process:
            assert set(full) == set(ref_state), f"state dict keys differ: {sorted(full)[:5]}"
            if precision == "no":
                for key, value in ref_state.items():
                    assert torch.allclose(full[key], value, atol=1e-4), (
                        f"FSDP{version} {strategy}: {key} differs"
                    )


def check_checkpoints(folder: Path) -> None:
    cases = [
        (2, "FULL_STATE_DICT"),
        (2, "SHARDED_STATE_DICT"),
        (1, "FULL_STATE_DICT"),
        (1, "SHARDED_STATE_DICT"),
        (1, "LOCAL_STATE_DICT"),
    ]
    for version, kind in cases:
        acc = fresh(fsdp_version=version, state_dict_type=kind)
        model, opt, dl, _ = train(acc, 10)
        straight = acc.get_state_dict(model)
        acc = fresh(fsdp_version=version, state_dict_type=kind)
        model, opt, dl, _ = train(acc, 4)
        target = folder / f"ckpt-{version}-{kind}"
        acc.save_state(target)
        if kind != "FULL_STATE_DICT":  # the seed's layout
            assert (target / "pytorch_model_fsdp_0").is_dir() and (
                target / "optimizer_0"
            ).is_dir(), sorted(os.listdir(target))
        acc = fresh(fsdp_version=version, state_dict_type=kind)
        set_seed(0)
        model = Net()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        dl = DataLoader(data(), batch_size=4)
        model, opt, dl = acc.prepare(model, opt, dl)
        acc.load_state(target)
        for x, y in itertools.islice(dl, 6):
            acc.backward(torch.nn.functional.mse_loss(model(x), y))
            acc.clip_grad_norm_(model.parameters(), 10.0)
            opt.step()
            opt.zero_grad()
        resumed = acc.get_state_dict(model)
        if acc.is_main_process:
            for key, value in straight.items():
                assert torch.allclose(resumed[key], value, atol=1e-6), (
                    f"FSDP{version} {kind}: resumed {key} differs by {(resumed[key] - value).abs().max()}"
                )
    # keep a 2-process SHARDED checkpoint and its full weights for the 1-process reload and merge checks
    acc = fresh(fsdp_version=2, state_dict_type="SHARDED_STATE_DICT")
    model, _, _, _ = train(acc, 5)
    acc.save_state(folder / "for-reload")
    full = acc.get_state_dict(model)
    if acc.is_main_process:
        torch.save(full, folder / "for-reload-full.pt")


def load_resharded(checkpoint: Path, expected_file: Path, seed: int) -> dict | None:
    """Load a SHARDED checkpoint into a differently initialised model; check its weights."""
    acc = fresh(fsdp_version=2, state_dict_type="SHARDED_STATE_DICT")
    set_seed(seed)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, opt = acc.prepare(model, opt)
    acc.load_state(checkpoint)
    full = acc.get_state_dict(model)
    if not acc.is_main_process:
        return None
    expected = torch.load(expected_file, weights_only=True)
    for key, value in expected.items():
        assert torch.equal(full[key], value), f"{key} differs after resharding"
    return expected


def check_reload_elsewhere(folder: Path) -> None:
    """Run on a different number of processes than the save: DCP reshards."""
    expected = load_resharded(folder / "for-reload", folder / "for-reload-full.pt", 123)
    if expected is not None:
        from accel.utils.modeling import load_weights
        from accel_fsdp import merge_fsdp_weights

        merged = merge_fsdp_weights(
            folder / "for-reload" / "pytorch_model_fsdp_0", folder / "merged"
        )
        plain = Net()
        plain.load_state_dict(load_weights(merged))
        x = torch.randn(3, 6)
        reference_model = Net()
        reference_model.load_state_dict(expected)
        assert torch.equal(plain(x), reference_model(x))
    # a LOCAL_STATE_DICT checkpoint is tied to its number of processes: a clear error
    acc = fresh(fsdp_version=1, state_dict_type="LOCAL_STATE_DICT")
    model, opt = acc.prepare(Net(), torch.optim.AdamW(Net().parameters()))
    try:
        acc.load_state(folder / "ckpt-1-LOCAL_STATE_DICT")
    except CheckpointError as exc:
        assert "SHARDED_STATE_DICT" in str(exc) and "2 processes" in str(exc), exc
    else:
        raise AssertionError("a 2-process LOCAL_STATE_DICT checkpoint loaded in 1 process")
    # and the other way round: saved by 1 process, loaded by 2 (check_grow)
    acc = fresh(fsdp_version=2, state_dict_type="SHARDED_STATE_DICT")
    model, _, _, _ = train(acc, 3)
    acc.save_state(folder / "from-one")
    torch.save(acc.get_state_dict(model), folder / "from-one-full.pt")


def check_grow(folder: Path) -> None:
    """A SHARDED checkpoint written by 1 process, loaded by 2."""
    load_resharded(folder / "from-one", folder / "from-one-full.pt", 321)


if __name__ == "__main__":
    folder = Path(sys.argv[2])
    checks = {
        "parity": check_parity,
        "checkpoints": lambda: check_checkpoints(folder),
        "reload": lambda: check_reload_elsewhere(folder),
        "grow": lambda: check_grow(folder),
    }
    for name in sys.argv[1].split(","):
        checks[name]()
        if not dist.is_initialized() or dist.get_rank() == 0:
            print(f"ok {name}", flush=True)
