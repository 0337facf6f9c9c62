"""``notebook_launcher`` on XLA (PJRT CPU, 2 devices): accel's core launcher hands over to accel-tpu.

The training function is defined here, as in a notebook cell; the replicas are forked.
Each writes ``<ordinal>.json`` into the directory given as argument; a second launch
after the runtime was started in this process must be refused clearly.
"""

import json
import sys
from pathlib import Path

import torch
from accel import Accelerator, notebook_launcher


def training_loop(out_dir, tag):
    acc = Accelerator()
    model = torch.nn.Linear(4, 1).to(acc.device)
    model(torch.randn(2, 4, device=acc.device)).sum().backward()
    report = {
        "process_index": acc.process_index,
        "num_processes": acc.num_processes,
        "device": str(acc.device),
        "mixed_precision": acc.mixed_precision,
        "tag": tag,
    }
    (Path(out_dir) / f"{acc.process_index}.json").write_text(json.dumps(report))


out = Path(sys.argv[1])
notebook_launcher(training_loop, (str(out), "nb"), num_processes=2, mixed_precision="bf16")
reports = sorted(json.loads(p.read_text())["process_index"] for p in out.glob("*.json"))
assert reports == [0, 1], reports

import torch_xla  # noqa: E402

torch.ones(1, device=torch_xla.device()).sum().item()  # the notebook now uses the device itself
try:
    notebook_launcher(training_loop, (str(out), "again"), num_processes=2)
except RuntimeError as exc:
    assert "restart the notebook" in str(exc), exc
    refused = str(exc)
else:
    raise AssertionError("a launch after the runtime started was accepted")
print(json.dumps({"ordinals": reports, "refused": refused}))
