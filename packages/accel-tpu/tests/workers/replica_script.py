"""Started by ``accel launch --tpu --num_processes 2`` (PJRT CPU): each replica reports itself.

``main`` is the script's main_training_function; it writes ``<ordinal>.json`` into the
directory given as the script's argument, after a local training step (no collective:
they abort on PJRT CPU, pytorch/xla#5005).
"""

import json
import sys
from pathlib import Path

import torch


def main():
    from accel import Accelerator

    out = Path(sys.argv[1])
    acc = Accelerator()
    model = torch.nn.Linear(4, 1).to(acc.device)
    loss = model(torch.randn(8, 4, device=acc.device)).pow(2).mean()
    loss.backward()
    report = {
        "process_index": acc.process_index,
        "local_process_index": acc.local_process_index,
        "num_processes": acc.num_processes,
        "device": str(acc.device),
        "distributed_type": str(acc.distributed_type),
        "mixed_precision": acc.mixed_precision,
        "argv": sys.argv[1:],
        "loss_finite": bool(torch.isfinite(loss).item()),
    }
    (out / f"{acc.process_index}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    raise SystemExit("run me with accel launch --tpu")
