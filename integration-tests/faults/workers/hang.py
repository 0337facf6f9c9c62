"""Worker: rank 1 breaks the collective order; the launcher must report the hang.

Arguments: MODE TIMEOUT OUT; writes OUT/broken-rank<R> (time.time()) just before the break.
MODE is
  skip_gather   rank 1 skips a gather and goes on to the next collective (a barrier)
  skip_barrier  rank 1 skips wait_for_everyone and goes on computing (sleeps)
  raise         rank 1 raises before a gather
"""

import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
from accel import Accelerator, InitProcessGroupKwargs

mode = sys.argv[1]
timeout = float(sys.argv[2])
out = Path(sys.argv[3])
accelerator = Accelerator(
    cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=timeout))]
)
rank = accelerator.process_index
value = torch.tensor([float(rank)])
accelerator.gather(value)  # collective #1: every rank
accelerator.wait_for_everyone()  # collective #2: every rank
(out / f"broken-rank{rank}").write_text(str(time.time()))

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
