"""Worker: the process group forms, then (first attempt only) one rank SIGKILLs itself.

Arguments: OUT VICTIM DELAY. On attempt 0 every rank runs a first collective, writes
OUT/ready-rank<R>; rank VICTIM waits until both ranks are ready, sleeps DELAY seconds and
kills itself while the other waits in a second collective. The restarted attempt must form
a new group: it runs collectives and writes OUT/done-rank<R>-restart<N>.json.
"""

import json
import os
import signal
import sys
import time
from pathlib import Path

import torch
from accel import PartialState
from accel.distributed.operations import gather_object, reduce

out, victim, delay = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
state = PartialState()
rank = state.process_index
total = reduce(torch.tensor([float(rank + 1)]), "sum")  # the group exists: a first collective
(out / f"ready-rank{rank}-restart{restart}").write_text(str(os.getpid()))
if restart == 0:
    if rank == victim:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list(out.glob("ready-rank*-restart0"))) < 2:
            time.sleep(0.05)
        time.sleep(delay)
        os.kill(os.getpid(), signal.SIGKILL)
    state.wait_for_everyone()  # the survivor waits here when its peer dies
total = reduce(torch.tensor([float(rank + 1)]), "sum")
ranks = gather_object(rank)
state.wait_for_everyone()
record = {"rank": rank, "restart": restart, "sum": total.item(), "ranks": ranks}
(out / f"done-rank{rank}-restart{restart}.json").write_text(json.dumps(record))
