"""FSDP2 sharded ``save_state(async_save=True)`` on real processes (run by test_async_save.py)."""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from accel import Accelerator, FullyShardedDataParallelPlugin, ProjectConfiguration
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
        # large enough that copying it takes longer than the next steps: without the step
        # waiting for the copy, the async checkpoint would hold later values
        self.wide = torch.nn.Linear(16, 16 * 8192)
        self.out = torch.nn.Linear(16, 1)

    def forward(self, x):
        x = self.inp(x)
        x = x + self.wide(x).view(x.shape[0], 8192, 16).mean(dim=1)
        for block in self.blocks:
            x = block(x)
        return self.out(x)


def fresh(version: int = 2, kind: str = "SHARDED_STATE_DICT", **config) -> Accelerator:
    AcceleratorState._reset_state()
    GradientState._reset_state()
    plugin = FullyShardedDataParallelPlugin(fsdp_version=version, state_dict_type=kind)
    return Accelerator(fsdp_plugin=plugin, project_config=ProjectConfiguration(**config))


def build(acc: Accelerator):
    set_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 6, generator=g)
    data = TensorDataset(x, x.sum(dim=1, keepdim=True).sin())
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.9)
    return acc.prepare(model, opt, DataLoader(data, batch_size=4, shuffle=True), sched)


def steps(acc: Accelerator, model, opt, sched, dl, count: int) -> None:
    for x, y in itertools.islice(dl, count):
        acc.backward(torch.nn.functional.mse_loss(model(x), y))
        opt.step()
        sched.step()
        opt.zero_grad()


def full_state(acc: Accelerator, model, opt) -> dict[str, torch.Tensor]:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    state = {f"model.{k}": v for k, v in acc.get_state_dict(model).items()}
    options = StateDictOptions(full_state_dict=True)
    optim = get_optimizer_state_dict(model, opt.optimizer, options=options)
    for param, entries in optim["state"].items():
        for name, value in entries.items():
            state[f"optim.{param}.{name}"] = value
    return state


def check_resume(folder: Path, version: int = 2, kind: str = "SHARDED_STATE_DICT") -> None:
    """Resume from an async checkpoint == resume from a sync one (bit for bit), while the
    loop changes every tensor between save_state and the end of the write."""
    results = {}
    for mode in ("sync", "async"):
        target = folder / f"{version}-{kind}-{mode}"
        acc = fresh(version, kind)
        model, opt, dl, sched = build(acc)
        steps(acc, model, opt, sched, dl, 5)
        acc.save_state(target, async_save=mode == "async")
        if mode == "async":
            steps(acc, model, opt, sched, dl, 3)  # the first step waits for the copy
            acc.wait_for_everyone()  # waits for the write
        assert (target / "accel_manifest.json").exists(), sorted(os.listdir(target))
        if kind == "SHARDED_STATE_DICT":
            assert (target / "pytorch_model_fsdp_0" / ".metadata").exists()
        assert not any(p.name.endswith(".accel-tmp") for p in folder.iterdir())
        acc = fresh(version, kind)
        model, opt, dl, sched = build(acc)
        acc.load_state(target)
        steps(acc, model, opt, sched, dl, 4)
        results[mode] = full_state(acc, model, opt) if version == 2 else acc.get_state_dict(model)
    if dist.get_rank() == 0:
        assert results["sync"].keys() == results["async"].keys()
        for key, value in results["sync"].items():
            assert torch.equal(value, results["async"][key]), f"{version} {kind}: {key} differs"


def check_other_kinds(folder: Path) -> None:
    """FSDP2 FULL_STATE_DICT and FSDP1 LOCAL_STATE_DICT go through core's staging too."""
    check_resume(folder, 2, "FULL_STATE_DICT")
    check_resume(folder, 1, "LOCAL_STATE_DICT")


def check_naming(folder: Path) -> None:
    """Automatic naming + total_limit: pruned after completion; end_training waits."""
    acc = fresh(project_dir=str(folder / "run"), automatic_checkpoint_naming=True, total_limit=2)
    model, opt, dl, sched = build(acc)
    for _ in range(3):
        steps(acc, model, opt, sched, dl, 2)
        acc.save_state(async_save=True)  # waits for the previous one
    acc.end_training()
    if dist.get_rank() == 0:
        names = sorted(p.name for p in (folder / "run" / "checkpoints").iterdir())
        assert names == ["checkpoint_1", "checkpoint_2"], names
    dist.barrier()
    acc = fresh(project_dir=str(folder / "run"), automatic_checkpoint_naming=True)
    model, opt, dl, sched = build(acc)
    acc.load_state()  # the newest, complete one


if __name__ == "__main__":
    root = Path(sys.argv[2])
    for name in sys.argv[1].split(","):
        checks = {"resume": check_resume, "naming": check_naming, "kinds": check_other_kinds}
        checks[name](root)
        if dist.get_rank() == 0:
            print(f"ok {name}", flush=True)
