"""Run by ``accel launch --config_file <seed YAML>``: the DeepSpeed config file's optimizer and scheduler."""

from __future__ import annotations

import itertools
import types

import torch
from accel import Accelerator, DummyOptim, DummyScheduler
from accel.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = types.SimpleNamespace(hidden_size=16)
        self.inp = torch.nn.Linear(6, 16)
        self.out = torch.nn.Linear(16, 1)

    def forward(self, x):
        return self.out(torch.tanh(self.inp(x)))


def main() -> None:
    acc = Accelerator()
    assert acc.distributed_type == "DEEPSPEED" and acc.num_processes == 2, acc
    plugin = acc.state.deepspeed_plugin
    assert plugin.zero_stage == 2 and plugin.get_value("optimizer.type") == "AdamW"
    set_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 6, generator=g)
    dl = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True).sin()), batch_size=8)
    model = Net()
    opt = DummyOptim(model.parameters(), lr=5e-2, weight_decay=0.0)
    sched = DummyScheduler(opt, total_num_steps=4, warmup_num_steps=2)
    model, opt, dl, sched = acc.prepare(model, opt, dl, sched)
    engine = acc.backend.engine_of(model)
    config = engine.config
    assert config["optimizer"]["params"]["lr"] == 5e-2, config["optimizer"]
    assert config["scheduler"]["params"]["total_num_steps"] == 4
    assert config["scheduler"]["params"]["warmup_max_lr"] == 5e-2
    assert config["train_micro_batch_size_per_gpu"] == 8 and config["train_batch_size"] == 16
    assert config["zero_optimization"]["reduce_bucket_size"] == 256
    assert type(engine.optimizer).__name__.startswith("DeepSpeedZero"), type(engine.optimizer)
    before = {k: v.clone() for k, v in acc.get_state_dict(model).items()}
    lrs = []
    for xb, yb in itertools.islice(dl, 4):
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        acc.backward(loss)
        opt.step()
        sched.step()
        opt.zero_grad()
        lrs.append(sched.get_last_lr()[0])
    assert lrs[0] < lrs[1] == 5e-2 and lrs[-1] < lrs[1], lrs  # warmup, then decay
    after = acc.get_state_dict(model)
    assert all(not torch.equal(before[k], after[k]) for k in before), "the model did not train"
    acc.print("ok launched", lrs)


if __name__ == "__main__":
    main()
