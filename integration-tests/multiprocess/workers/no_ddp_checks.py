"""With accel-ddp disabled: data work runs on 2 processes, preparing a model names accel-ddp."""

from __future__ import annotations

import torch
from accel import Accelerator
from accel.errors import MissingPluginError
from torch.utils.data import DataLoader

accelerator = Accelerator()
loader = accelerator.prepare(DataLoader(list(range(8)), batch_size=2))
assert sorted(accelerator.gather_for_metrics(torch.cat(list(loader))).tolist()) == list(range(8))
try:
    accelerator.prepare(torch.nn.Linear(2, 2))
except MissingPluginError as error:
    assert "accel-ddp" in str(error) and "pip install accel-ddp" in str(error), str(error)
else:
    raise AssertionError("preparing a model without accel-ddp must fail")
if accelerator.is_main_process:
    print("ok no_ddp", flush=True)
