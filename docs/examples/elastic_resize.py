"""Elastic training: a checkpoint written on some number of processes resumes on another.

Run it on 2 processes, then again on 1 (docs/elastic.md shows what the second run logs):

    accel launch --cpu --num_processes 2 docs/examples/elastic_resize.py
    accel launch --cpu --num_processes 1 docs/examples/elastic_resize.py
"""

# --8<-- [start:resize]
import torch
from accel import Accelerator, GradientAccumulationPlugin
from accel.utils import ProjectConfiguration, set_seed

set_seed(0)
accelerator = Accelerator(
    gradient_accumulation_plugin=GradientAccumulationPlugin(
        num_steps=2, keep_global_batch_size=True
    ),
    project_config=ProjectConfiguration(project_dir="run", automatic_checkpoint_naming=True),
)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(torch.randn(64, 4), batch_size=8, shuffle=True)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
resumed = accelerator.resume()  # the newest complete checkpoint of run/checkpoints (None at first)
for step, batch in enumerate(loader):
    with accelerator.accumulate(model):
        accelerator.backward(model(batch).pow(2).mean())
        optimizer.step()
        optimizer.zero_grad()
    if resumed is None and step == 1:
        accelerator.save_state()  # run/checkpoints/checkpoint_0: its data position is global
        break  # the job stops here (a node is lost): run it again, on any number of processes
accelerator.end_training()
# --8<-- [end:resize]
