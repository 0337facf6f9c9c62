"""One process whose address space is capped: the whole batch fails in PyTorch's CPU allocator.

Run by ``test_microbatch.py``. It prints the allocator's own error message (got by a plain
forward and backward under the cap), then trains 2 steps with ``train_step`` under the same cap
and checks that the batch was split once and the weights equal those of an uncapped run.
"""

from __future__ import annotations

import logging

import torch
from accel import Accelerator
from accel.testing.memory import capped_address_space

torch.set_num_threads(1)
K = 1 << 19  # one sample's activation: 16 * K floats = 32 MiB
PER_SAMPLE = 16 * K * 4
logging.basicConfig(level=logging.WARNING)


class Wide(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.inp = torch.nn.Linear(16, 16)
        self.scale = torch.nn.Parameter(torch.randn(1, 1, K) * 0.01)
        self.out = torch.nn.Linear(16, 1)

    def forward(self, x):
        return self.out(torch.tanh(self.inp(x).unsqueeze(-1) * self.scale).mean(-1))


def batch(step):
    g = torch.Generator().manual_seed(step)
    return torch.randn(8, 16, generator=g), torch.randn(8, 1, generator=g)


def run(capped: bool) -> torch.Tensor:
    acc = Accelerator(cpu=True)
    model = Wide()
    model, opt = acc.prepare(model, torch.optim.SGD(model.parameters(), lr=0.5))

    def step(micro):
        x, y = micro
        loss = torch.nn.functional.mse_loss(model(x), y)
        acc.backward(loss)
        return loss

    x, y = batch(0)
    acc.train_step(step, (x[:1], y[:1]))  # warm-up on one sample
    opt.zero_grad()
    if capped:
        # the whole batch needs about 20 times one sample's activation, half of it about 10
        with capped_address_space(17 * PER_SAMPLE):
            try:
                torch.nn.functional.mse_loss(model(x), y).backward()
                raise AssertionError("the whole batch fitted under the cap")
            except RuntimeError as error:
                print(str(error).splitlines()[0])
            opt.zero_grad()
            for index in range(2):
                acc.train_step(step, batch(index))
                opt.step()
                opt.zero_grad()
        assert acc.micro_batching.micro_batch_size == 4
    else:
        for index in range(2):
            acc.train_step(step, batch(index))
            opt.step()
            opt.zero_grad()
        assert acc.micro_batching.micro_batch_size is None
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


if __name__ == "__main__":
    free = run(capped=False)
    capped = run(capped=True)
    difference = float((capped - free).abs().max() / free.abs().max())
    assert difference <= 1e-6, difference
    print("ok", difference)
