"""Launched by `accel launch --config_file <Accelerate's own FSDP config>` (issue 19).

argv: the expected ignored-modules regex ("null" for none). Checks that the config's
``fsdp_config`` reached the plugin, that FSDP2 sharded the wrapped layers and left the
ignored module's parameters whole, and that one training step runs on both ranks.
"""

from __future__ import annotations

import sys

import torch
from accel import Accelerator
from accel.utils import DistributedType
from torch.distributed.tensor import DTensor


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return x + torch.tanh(self.fc(x))


class Net(torch.nn.Module):
    _no_split_modules = ["Block"]

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main(expect_ignored: str) -> None:
    acc = Accelerator()
    plugin = acc.state.fsdp_plugin
    assert acc.distributed_type == DistributedType.FSDP and acc.num_processes == 2, acc
    assert acc.device.type == "cpu", acc.device
    assert plugin.fsdp_version == 2 and plugin.state_dict_type == "SHARDED_STATE_DICT", plugin
    assert plugin.ignored_modules == (None if expect_ignored == "null" else expect_ignored)
    model = acc.prepare(Net())
    opt = acc.prepare(torch.optim.SGD(model.parameters(), lr=0.1))
    sharded = {name for name, p in model.named_parameters() if isinstance(p, DTensor)}
    whole = {name for name, p in model.named_parameters()} - sharded
    wrapped = sorted(type(m).__name__ for m in model.modules() if hasattr(m, "reshard"))
    if expect_ignored == "null":
        assert not whole, whole
        assert wrapped == ["FSDPBlock", "FSDPBlock", "FSDPNet"], wrapped
    else:
        assert whole == {"head.weight", "head.bias"}, whole
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(acc.process_index))
    loss = model(x).pow(2).mean()
    acc.backward(loss)
    opt.step()
    if acc.is_main_process:
        print("ok accelerate fsdp config", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
