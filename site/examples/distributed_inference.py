"""Distributed inference: each process handles its share of the prompts.

Run on 2 processes: ``accel launch --cpu --num_processes 2 docs/examples/distributed_inference.py``.
Needs only accel-core (and accel-cli for ``accel launch``).
"""

from accel import PartialState
from accel.utils import gather_object

prompts = ["a dog", "a cat", "a chicken", "a horse", "a cow"]

# --8<-- [start:split]
state = PartialState()
with state.split_between_processes(prompts) as my_prompts:  # 3 on rank 0, 2 on rank 1
    results = [f"{state.process_index}: {prompt.upper()}" for prompt in my_prompts]
    print(f"process {state.process_index} got {my_prompts}")

everything = gather_object(results)  # every process receives the list of all results
# --8<-- [end:split]
state.wait_for_everyone()
if state.is_main_process:
    print(everything)
    assert [r.split(": ")[1] for r in everything] == [p.upper() for p in prompts]
    assert state.num_processes == 2 and {r[0] for r in everything} == {"0", "1"}
