"""Joins the group, records where it runs, then rank 1 raises: ``fail_rank.py OUT``."""

import json
import os
import sys
from pathlib import Path

import ray
import torch
from accel import Accelerator

out = Path(sys.argv[1])
accelerator = Accelerator()
total = accelerator.reduce(torch.tensor([accelerator.process_index + 1.0]), "sum")
(out / f"rank{accelerator.process_index}.json").write_text(
    json.dumps(
        {
            "node_id": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "sum": total.item(),
            "world": accelerator.num_processes,
        }
    )
)
if accelerator.process_index == 1:
    raise ValueError("rank 1 fails on purpose")
