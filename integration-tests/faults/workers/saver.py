"""Processes that resume, then train and checkpoint forever (total_limit=2) until killed.

argv: PROJECT_DIR. torch and accel are imported once; then each line read from stdin forks
a new process (a real one, killed for real), which prints ``started <pid>``, then
``resumed <path or None>``, then ``saved <path>`` per save. When it has ended this process
prints ``exited <exit code>`` (-9: SIGKILL). End of input: exit. Each line is one
``write`` to the pipe, which a kill cannot cut in half.
"""

from __future__ import annotations

import os
import sys
import traceback

import torch
from accel import Accelerator, ProjectConfiguration


def say(*words: object) -> None:
    os.write(1, (" ".join(map(str, words)) + "\n").encode())


def train_forever(project: str) -> None:
    say("started", os.getpid())
    accelerator = Accelerator(
        cpu=True,
        project_config=ProjectConfiguration(
            project_dir=project, automatic_checkpoint_naming=True, total_limit=2
        ),
    )
    torch.manual_seed(0)
    model = torch.nn.Sequential(*(torch.nn.Linear(512, 512) for _ in range(8)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    say("resumed", accelerator.resume())
    while True:
        loss = model(torch.randn(4, 512)).square().mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        say("saved", accelerator.save_state())


def main() -> None:
    project = sys.argv[1]
    # a torch optimizer's first construction imports torch._dynamo (seconds): once, here;
    # nothing else is set up (no Accelerator, no thread) before the forks
    torch.optim.Adam(torch.nn.Linear(1, 1).parameters())
    for _ in sys.stdin:
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                train_forever(project)
            except BaseException:
                traceback.print_exc()
                sys.stderr.flush()
            os._exit(1)
        _, status = os.waitpid(pid, 0)
        say("exited", os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
