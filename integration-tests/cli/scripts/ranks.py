"""Worker: checks the process state and collectives, writes what it saw to OUT/rank<R>-restart<N>.json.

Arguments: OUT [--fail-rank R] [--kill-rank-once R] [--sleep SECONDS]
"""

import argparse
import json
import os
import signal
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--fail-rank", type=int, default=None)
parser.add_argument("--kill-rank-once", type=int, default=None)
parser.add_argument("--sleep", type=float, default=0)
args = parser.parse_args()
out = Path(args.out)
rank = int(os.environ.get("RANK", "0"))
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
(out / f"pid-rank{rank}-restart{restart}").write_text(str(os.getpid()))

if args.kill_rank_once == rank and restart == 0:
    os.kill(os.getpid(), signal.SIGKILL)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from accel import PartialState  # noqa: E402
from accel.config.launched import launched_config  # noqa: E402

state = PartialState()
if args.fail_rank == rank:
    raise ValueError(f"boom on rank {rank}")
total = torch.tensor([float(state.process_index + 1)])
dist.all_reduce(total)
ranks = [None] * state.num_processes
dist.all_gather_object(ranks, state.process_index)
record = {
    "rank": state.process_index,
    "local_rank": state.local_process_index,
    "world": state.num_processes,
    "group_rank": int(os.environ.get("GROUP_RANK", "-1")),
    "restart": restart,
    "sum": total.item(),
    "ranks": ranks,
    "backend": state.backend,
    "device": str(state.device),
    "env": {
        k: v for k, v in os.environ.items() if k.startswith("ACCEL_") and k != "ACCEL_LAUNCH_CONFIG"
    },
    "config": launched_config(),
}
(out / f"rank{rank}-restart{restart}.json").write_text(json.dumps(record))
if args.sleep:
    time.sleep(args.sleep)
state.wait_for_everyone()
