"""Worker: rank 1 breaks the collective order; the launcher must report the hang.

Arguments: MODE [TIMEOUT]; MODE is
  skip_gather   rank 1 skips a gather and goes on to the next collective (a barrier)
  skip_barrier  rank 1 skips wait_for_everyone and goes on computing (sleeps)
  raise         rank 1 raises before a gather
"""

import sys
import time
from datetime import timedelta

import torch
from accel import Accelerator, InitProcessGroupKwargs

mode = sys.argv[1]
timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
accelerator = Accelerator(
    cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=timeout))]
)
rank = accelerator.process_index
value = torch.tensor([float(rank)])
accelerator.gather(value)  # collective #1: every rank
accelerator.wait_for_everyone()  # collective #2: every rank

if mode == "skip_gather":
    if rank != 1:
        accelerator.gather(value)  # collective #3: rank 1 never calls it
    accelerator.wait_for_everyone()
elif mode == "skip_barrier":
    if rank != 1:
        accelerator.wait_for_everyone()  # collective #3: rank 1 never calls it
    else:
        time.sleep(4 * timeout)  # busy elsewhere, past the timeout
elif mode == "raise":
    if rank == 1:
        raise RuntimeError("rank 1 failed before the gather")
    accelerator.gather(value)  # collective #3
print(f"rank {rank} finished", flush=True)
