"""FSDP2 checkpoints of an optimizer without state, on real processes (run by test_empty_optimizer_state.py).

``empty_optimizer_checks.py <kind>:<tp|dp>,... <folder>``: for each entry, train one step with
``SGD(lr)`` (no momentum: ``optimizer.state_dict()["state"]`` is empty), ``save_state``, then
``load_state`` into a fresh Accelerator, model and optimizer: same weights, same learning
rate. ``dp``: FSDP2 over every process; ``tp``: tensor parallelism over 2 processes
(``ParallelismConfig(tp_size=2)``); ``dp2tp2``: dp_shard=2 x tp=2 (4 processes).
Accelerate's ``save_fsdp_optimizer`` / ``load_fsdp_optimizer`` are checked the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from accel import Accelerator, FullyShardedDataParallelPlugin, ParallelismConfig
from accel.state import AcceleratorState, GradientState
from accel.utils import set_seed
from accel_fsdp.checkpointing import load_fsdp_optimizer, save_fsdp_optimizer


class Net(torch.nn.Module):
    tp_plan = {"up": "colwise", "down": "rowwise"}

    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.down(torch.tanh(self.up(x)))


LAYOUTS = {"dp": None, "tp": {"tp_size": 2}, "dp2tp2": {"dp_shard_size": 2, "tp_size": 2}}


def fresh(kind: str, layout: str, seed: int, lr: float):
    """A new Accelerator with a new model and ``SGD(lr)``, prepared."""
    AcceleratorState._reset_state()
    GradientState._reset_state()
    acc = Accelerator(
        fsdp_plugin=FullyShardedDataParallelPlugin(fsdp_version=2, state_dict_type=kind),
        parallelism_config=ParallelismConfig(**LAYOUTS[layout]) if LAYOUTS[layout] else None,
    )
    set_seed(seed)
    model = Net()
    model, optimizer = acc.prepare(model, torch.optim.SGD(model.parameters(), lr=lr))
    return acc, model, optimizer


def round_trip(kind: str, layout: str, folder: Path) -> None:
    acc, model, optimizer = fresh(kind, layout, seed=0, lr=0.1)
    acc.backward(model(torch.randn(4, 8)).pow(2).mean())
    optimizer.step()
    optimizer.zero_grad()
    assert not optimizer.optimizer.state_dict()["state"]  # the case under test
    saved = acc.get_state_dict(model)
    acc.save_state(str(folder / "state"))
    save_fsdp_optimizer(acc.state.fsdp_plugin, acc, optimizer, model, folder / "accelerate")

    acc, model, optimizer = fresh(kind, layout, seed=1, lr=0.5)
    acc.load_state(str(folder / "state"))
    loaded = acc.get_state_dict(model)
    if acc.is_main_process:
        assert set(loaded) == set(saved), (sorted(loaded), sorted(saved))
        for name, value in saved.items():
            torch.testing.assert_close(loaded[name], value, msg=name)
    assert optimizer.param_groups[0]["lr"] == 0.1, optimizer.param_groups[0]["lr"]
    optimizer.param_groups[0]["lr"] = 0.5
    load_fsdp_optimizer(acc.state.fsdp_plugin, acc, optimizer, model, folder / "accelerate")
    assert optimizer.param_groups[0]["lr"] == 0.1, optimizer.param_groups[0]["lr"]
    acc.wait_for_everyone()
    acc.print(f"ok {kind} {layout}")


def main() -> None:
    folder = Path(sys.argv[2])
    for entry in sys.argv[1].split(","):
        kind, layout = entry.split(":")
        round_trip(kind, layout, folder / entry.replace(":", "_"))


if __name__ == "__main__":
    main()
