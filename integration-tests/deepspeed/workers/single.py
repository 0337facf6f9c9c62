"""One process, no launcher: a trivial process group, and clear errors from prepare()."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import torch
from accel import Accelerator, DeepSpeedPlugin, DummyOptim, DummyScheduler
from accel.errors import ConfigError
from accel.state import AcceleratorState, GradientState
from torch.utils.data import DataLoader, TensorDataset


def fresh(**kwargs) -> Accelerator:
    AcceleratorState._reset_state()
    GradientState._reset_state()
    return Accelerator(deepspeed_plugin=DeepSpeedPlugin(**kwargs))


def expect(error: str, *objects, **kwargs) -> None:
    acc = fresh(**kwargs)
    try:
        acc.prepare(*objects)
    except ConfigError as exc:
        assert error in str(exc), str(exc)
    else:
        raise AssertionError(f"no error, expected {error!r}")


def main(folder: Path) -> None:
    x = torch.randn(16, 4)
    dl = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    expect("train_micro_batch_size_per_gpu: pass a data loader", model, opt, zero_stage=2)
    seed_json = json.loads(Path(sys.argv[2]).read_text())
    seed_json["fp16"]["enabled"] = "auto"
    path = folder / "ds.json"
    path.write_text(json.dumps(seed_json))
    expect("pass accel.utils.DummyOptim", torch.nn.Linear(4, 1), opt, dl, hf_ds_config=str(path))
    dummy = DummyOptim(model.parameters())
    expect(
        "scheduler.params.total_num_steps: pass DummyScheduler",
        torch.nn.Linear(4, 1),
        dummy,
        dl,
        DummyScheduler(dummy),
        hf_ds_config=str(path),
    )  # and the model has no config.hidden_size:
    expect(
        "reduce_bucket_size: the model has no config.hidden_size",
        torch.nn.Linear(4, 1),
        dummy,
        dl,
        DummyScheduler(dummy, total_num_steps=4),
        hf_ds_config=str(path),
    )
    expect("no optimizer section", torch.nn.Linear(4, 1), dummy, dl, zero_stage=1)
    acc = fresh(zero_stage=2)
    assert acc.num_processes == 1 and torch.distributed.is_initialized()
    model, opt, dl = acc.prepare(model, opt, dl)
    for xb, yb in itertools.islice(dl, 2):
        acc.backward(torch.nn.functional.mse_loss(model(xb), yb))
        opt.step()
        opt.zero_grad()
    assert acc.clip_grad_norm_(model.parameters(), 1.0) is not None
    try:
        acc.clip_grad_value_(model.parameters(), 1.0)
    except NotImplementedError as exc:
        assert "by norm only" in str(exc)
    else:
        raise AssertionError("clip_grad_value_ should refuse")
    print("ok single")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
