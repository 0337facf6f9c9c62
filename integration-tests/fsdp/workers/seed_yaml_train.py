"""Trained by `accel launch --config_file <seed FSDP yaml>`: the YAML alone configures FSDP."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from accel import Accelerator
from accel.utils import DistributedType, set_seed
from torch.utils.data import DataLoader, TensorDataset


class Residual(torch.nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x):
        return x + torch.tanh(self.fc(x))


class T5Block(Residual):
    """The layer class seed_fsdp.yaml wraps."""


class BertLayer(Residual):
    """The layer class seed_fsdp_full.yaml wraps."""


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(6, 16)
        self.blocks = torch.nn.ModuleList([T5Block(16), BertLayer(16), BertLayer(16)])
        self.out = torch.nn.Linear(16, 1)

    def forward(self, x):
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.out(x)


def main(out: Path, expect_state_dict_type: str, expect_offload: bool) -> None:
    acc = Accelerator()
    plugin = acc.state.fsdp_plugin
    assert acc.distributed_type == DistributedType.FSDP and acc.num_processes == 2
    assert acc.mixed_precision == "bf16", acc.mixed_precision
    assert plugin.sharding_strategy == "FULL_SHARD", plugin.sharding_strategy
    assert plugin.state_dict_type == expect_state_dict_type, plugin.state_dict_type
    assert plugin.offload_params is expect_offload, plugin.offload_params
    set_seed(0)
    x = torch.randn(64, 6, generator=torch.Generator().manual_seed(0))
    data = TensorDataset(x, x.sum(dim=1, keepdim=True).sin())
    model = acc.prepare(Net())  # the seed's pattern: the optimizer after the model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    opt, dl = acc.prepare(opt, DataLoader(data, batch_size=4, shuffle=True))
    wrapped = {type(m).__name__ for m in model.modules() if hasattr(m, "reshard")}
    layers = plugin.transformer_cls_names_to_wrap
    layer = layers[0] if isinstance(layers, (list, tuple)) else layers
    assert wrapped == {f"FSDP{layer}", "FSDPNet"}, wrapped  # only the YAML's layer class (+ root)
    losses = []
    for _ in range(3):
        for xb, yb in dl:
            loss = torch.nn.functional.mse_loss(model(xb).float(), yb)
            acc.backward(loss)
            opt.step()
            opt.zero_grad()
            losses.append(acc.reduce(loss.detach(), "mean").item())
    first, last = sum(losses[:8]) / 8, sum(losses[-8:]) / 8
    assert last < first, (first, last)
    acc.save_state(out / "ckpt")
    before = acc.get_state_dict(model)
    acc.load_state(out / "ckpt")
    after = acc.get_state_dict(model)
    if acc.is_main_process:
        assert all(torch.equal(before[k], after[k]) for k in before)
        print(f"ok seed yaml: loss {first:.4f} -> {last:.4f}", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "offload")
