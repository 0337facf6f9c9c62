"""Started by `accel launch` under mpirun or SLURM: checks this rank's view and talks to the others.

Prints one line ``ok rank=R world=W local=L node=N sum=S`` and exits non-zero on a mismatch.
Argument: the expected world size.
"""

import os
import sys

import torch
import torch.distributed as dist
from accel import Accelerator

expected = int(sys.argv[1])
accelerator = Accelerator(cpu=True)
state = accelerator.state
assert state.num_processes == expected, (state.num_processes, expected)
assert dist.is_initialized() and dist.get_world_size() == expected
assert dist.get_rank() == state.process_index
assert int(os.environ["RANK"]) == state.process_index
assert int(os.environ["LOCAL_RANK"]) == state.local_process_index
assert os.environ["ACCEL_USE_CPU"] == "true"
total = torch.tensor([float(state.process_index + 1)])
dist.all_reduce(total)
assert total.item() == expected * (expected + 1) / 2, total
gathered = accelerator.gather(torch.tensor([state.process_index]))
assert gathered.tolist() == list(range(expected)), gathered
node = os.environ.get("GROUP_RANK", os.environ.get("NODE_RANK", "?"))
# One write call per line: print() writes the text and its newline separately, and the ranks
# share one stdout, so two ranks' lines could otherwise run together.
sys.stdout.write(
    f"ok rank={state.process_index} world={state.num_processes} "
    f"local={state.local_process_index} node={node} sum={total.item():g}\n"
)
sys.stdout.flush()
