"""``Accelerator.train_step`` (automatic micro-batching) on 2 real gloo processes under DDP.

Scenarios, in one launch (results written by rank 0 as JSON to ``argv[1]``):

- ``tokens``: variable-length sequences, a token-weighted loss; splits of 4, 2 and 1
  micro-batches per process (4x2, 2x2, 1x2) against plain PyTorch on the whole global batch;
- ``oom``: only rank 1's address space is capped so that its whole batch fails in the CPU
  allocator and half of it fits; both ranks must split in the same step, keep the split, and
  end with the parameters of plain PyTorch on the whole batch. Then ``save_state`` to ``argv[2]``
  (``--tokens-only`` instead runs ``tokens`` alone, on any number of processes dividing 8).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys

import torch
from accel import Accelerator
from accel.state import AcceleratorState, GradientState
from accel.testing.memory import capped_address_space
from accel.testing.token_data import GLOBAL, VOCAB, WIDTH, token_batch, token_loss

torch.set_num_threads(1)
STEPS = 3


def fresh(**kwargs) -> Accelerator:
    AcceleratorState._reset_state()
    GradientState._reset_state()
    return Accelerator(cpu=True, **kwargs)


def relative(a: torch.nn.Module, b: torch.nn.Module) -> float:
    pa = torch.cat([p.detach().reshape(-1) for p in a.parameters()])
    pb = torch.cat([p.detach().reshape(-1) for p in b.parameters()])
    return float((pa - pb).abs().max() / pb.abs().max())


# -- variable-length sequences, token-weighted loss ------------------------------------
def token_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Embedding(VOCAB, WIDTH), torch.nn.Tanh(), torch.nn.Linear(WIDTH, VOCAB)
    )


def token_reference() -> torch.nn.Module:
    model = token_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(STEPS):
        token_loss(model, token_batch(step)).backward()
        opt.step()
        opt.zero_grad()
    return model


def tokens(results: dict) -> None:
    reference = token_reference()
    for size in (1, 2, None):
        acc = fresh()
        model = token_model()
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        model, opt = acc.prepare(model, opt)
        acc.micro_batching.micro_batch_size = size

        def step(micro: dict, model=model, acc=acc) -> torch.Tensor:
            loss = token_loss(model, micro)
            acc.backward(loss)
            return loss

        share = GLOBAL // acc.num_processes
        for index in range(STEPS):
            batch = token_batch(index)
            mine = {
                k: v[acc.process_index * share : (acc.process_index + 1) * share]
                for k, v in batch.items()
            }
            acc.train_step(step, mine, count_items=lambda b: (b["labels"] != -100).sum())
            opt.step()
            opt.zero_grad()
        parts = acc.micro_batching.num_micro_batches(share)
        results[f"tokens {parts}x{acc.num_processes}"] = relative(
            acc.unwrap_model(model), reference
        )


# -- a real out-of-memory error on rank 1 only ------------------------------------------
K = 1 << 19  # one sample's activation: 16 * K floats = 32 MiB
PER_SAMPLE = 16 * K * 4


class Wide(torch.nn.Module):
    """Tiny weights, a large activation per sample (a few hundred MB for the whole batch)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.inp = torch.nn.Linear(16, 16)
        self.scale = torch.nn.Parameter(torch.randn(1, 1, K) * 0.01)
        self.out = torch.nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.inp(x).unsqueeze(-1) * self.scale).mean(-1))


def wide_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(200 + step)
    return torch.randn(16, 16, generator=g), torch.randn(16, 1, generator=g)


def oom(results: dict, checkpoint: str) -> None:
    acc = fresh()
    model = Wide()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model, opt = acc.prepare(model, opt)
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("accel.microbatch").addHandler(handler)

    def step(micro, model=model, acc=acc) -> torch.Tensor:
        x, y = micro
        loss = torch.nn.functional.mse_loss(model(x), y)
        acc.backward(loss)
        return loss

    share, rank = 8, acc.process_index
    # warm-up on one sample, gradients dropped: threads, allocator and gloo buffers exist
    x, y = wide_batch(0)
    acc.train_step(step, (x[:1], y[:1]))
    opt.zero_grad()
    acc.micro_batching.micro_batch_size = None
    acc.wait_for_everyone()
    # the whole batch needs about 20 times one sample's activation, half of it about 10
    cap = capped_address_space(17 * PER_SAMPLE) if rank == 1 else contextlib.nullcontext()
    sizes = []
    with cap:
        for index in range(STEPS):
            x, y = wide_batch(index)
            acc.train_step(
                step, (x[rank * share : (rank + 1) * share], y[rank * share : (rank + 1) * share])
            )
            opt.step()
            opt.zero_grad()
            sizes.append(acc.micro_batching.micro_batch_size)
    every = [None] * acc.num_processes
    torch.distributed.all_gather_object(every, sizes)
    results["oom sizes"] = every
    results["oom lines"] = lines
    acc.save_state(checkpoint)
    if rank == 0:
        reference = Wide()
        ref_opt = torch.optim.SGD(reference.parameters(), lr=0.5)
        for index in range(STEPS):
            x, y = wide_batch(index)
            torch.nn.functional.mse_loss(reference(x), y).backward()
            ref_opt.step()
            ref_opt.zero_grad()
        results["oom relative"] = relative(acc.unwrap_model(model), reference)


if __name__ == "__main__":
    found: dict = {}
    tokens(found)
    if sys.argv[2] != "--tokens-only":  # (4 or 8 processes: 2x4, 1x8 by hand)
        oom(found, sys.argv[2])
    if torch.distributed.get_rank() == 0:
        with open(sys.argv[1], "w") as out:
            json.dump(found, out)
