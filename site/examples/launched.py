"""Print what ``accel launch`` decided, as each process sees it.

Run: ``accel launch --config_file docs/examples/configs/multi_cpu.yaml docs/examples/launched.py``.
"""

import torch
from accel import Accelerator

# --8<-- [start:script]
accelerator = Accelerator()  # rank, world size, device and precision come from the launcher
print(
    f"process {accelerator.process_index}/{accelerator.num_processes}"
    f" {accelerator.distributed_type} {accelerator.mixed_precision} on {accelerator.device}"
)
total = accelerator.reduce(torch.tensor(accelerator.process_index + 1.0), reduction="sum")
accelerator.print("sum over processes:", total.item())  # printed once
# --8<-- [end:script]
assert accelerator.num_processes == 2 and accelerator.mixed_precision == "bf16"
assert str(accelerator.distributed_type).endswith("MULTI_CPU") and total.item() == 3.0
