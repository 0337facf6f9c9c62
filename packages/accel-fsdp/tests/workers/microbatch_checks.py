"""``Accelerator.train_step`` (automatic micro-batching) under FSDP2 on 2 real gloo processes.

Variable-length sequences and a token-weighted loss; after 3 optimizer steps the full
parameters must equal plain PyTorch on the whole global batch (rank 0 writes the largest
relative difference and the final micro-batch size of each scenario as JSON to ``argv[1]``):

- ``split <n>``: every batch in ``n`` micro-batches per process from the first step;
- ``accumulate``: two accumulation steps per optimizer step, each split in 2 micro-batches, so
  that FSDP2's unsharded gradients of the first are carried into the reducing backward;
- ``oom rank 1``: rank 1 raises the CPU allocator's out-of-memory error on its whole batch
  after its forward (on the first step and after accumulated gradients); both ranks must split;
- ``oom rank 1 mid-forward``: a model of four FSDP units (the root and three ``Block``), rank 1
  raises the error inside the first block's forward, while rank 0 goes on to the second
  block's all-gather: both ranks must meet, split and retry (without and with accumulation);
- ``oom rank 1 mid-backward``: the same model with two accumulation steps; rank 1 raises in the
  backward of the last block under ``no_sync``, while rank 0 goes on to the next block's
  backward, whose pre-backward prefetches the first block's all-gather (units are resharded
  after forward).
"""

from __future__ import annotations

import json
import sys

import torch
from accel import Accelerator, FullyShardedDataParallelPlugin
from accel.state import AcceleratorState, GradientState
from accel.testing.token_data import GLOBAL, VOCAB, WIDTH, token_batch, token_loss
from torch.distributed.fsdp import FSDPModule

torch.set_num_threads(1)
STEPS = 3
OOM = "[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes."


class Block(torch.nn.Module):
    """A unit FSDP shards on its own (``transformer_cls_names_to_wrap``)."""

    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.inner(x))


def token_model(units: bool = False) -> torch.nn.Module:
    torch.manual_seed(0)
    if units:
        return torch.nn.Sequential(
            torch.nn.Embedding(VOCAB, WIDTH),
            Block(),
            Block(),
            Block(),
            torch.nn.Linear(WIDTH, VOCAB),
        )
    return torch.nn.Sequential(
        torch.nn.Embedding(VOCAB, WIDTH), torch.nn.Tanh(), torch.nn.Linear(WIDTH, VOCAB)
    )


def reference(units: bool) -> dict[str, torch.Tensor]:
    model = token_model(units)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(STEPS):
        token_loss(model, token_batch(step)).backward()
        opt.step()
        opt.zero_grad()
    return model.state_dict()


def run(
    size: int | None,
    accumulation: int = 1,
    oom_on_rank_1: bool = False,
    units: bool = False,
    in_backward: bool = False,
) -> tuple[float, int]:
    """``(largest relative difference to plain PyTorch, final micro-batch size)``.

    ``units``: the model has three ``Block`` units, and ``oom_on_rank_1`` raises in the middle of
    its forward (in the first block) instead of after it; with ``in_backward``, in the backward
    of the last block of a step that does not synchronise.
    """
    AcceleratorState._reset_state()
    GradientState._reset_state()
    acc = Accelerator(
        fsdp_plugin=FullyShardedDataParallelPlugin(
            fsdp_version=2, transformer_cls_names_to_wrap=["Block"] if units else None
        ),
        gradient_accumulation_steps=accumulation,
    )
    model = token_model(units)
    model, opt = acc.prepare(model, torch.optim.SGD(model.parameters(), lr=0.5))
    acc.micro_batching.micro_batch_size = size
    whole = GLOBAL // acc.num_processes // accumulation
    if units:
        assert sum(isinstance(m, FSDPModule) for m in model.modules()) == 4
    if units and oom_on_rank_1 and acc.process_index == 1:

        def fail(module: torch.nn.Module, args: tuple) -> None:
            if len(args[0]) == whole:  # the whole batch does not fit: the micro-batches do
                raise RuntimeError(OOM)

        def fail_in_backward(module: torch.nn.Module, args: tuple, output: torch.Tensor) -> None:
            if not acc.sync_gradients and len(output) == whole:
                output.register_hook(lambda grad: fail(module, (grad,)))

        if in_backward:
            model[3].inner.register_forward_hook(fail_in_backward)
        else:
            model[1].inner.register_forward_pre_hook(fail)
        oom_on_rank_1 = False

    def step(micro: dict) -> torch.Tensor:
        loss = token_loss(model, micro)
        if oom_on_rank_1 and acc.process_index == 1 and len(micro["labels"]) == whole:
            raise RuntimeError(OOM)  # after the forward's all-gathers, before backward
        acc.backward(loss)
        return loss

    for index in range(STEPS):
        batch = token_batch(index)
        # the global batch is a whole optimizer step: each process's share, in accumulation steps
        chunks = [
            {k: v[rank :: acc.num_processes] for k, v in batch.items()}
            for rank in range(acc.num_processes)
        ][acc.process_index]
        for part in range(accumulation):
            piece = {k: v[part * whole : (part + 1) * whole] for k, v in chunks.items()}
            with acc.accumulate(model):
                acc.train_step(
                    step,
                    piece,
                    count_items=lambda b: (b["labels"] != -100).sum(),
                    # the items of the whole optimizer step: exact over accumulation steps too
                    num_items_in_batch=(batch["labels"] != -100).sum()
                    if accumulation > 1
                    else None,
                )
                opt.step()
                opt.zero_grad()
    full = acc.get_state_dict(model)  # the full parameters, on rank 0
    size = acc.micro_batching.micro_batch_size
    if acc.process_index != 0:
        return 0.0, size
    expected = reference(units)
    top = max(float(v.abs().max()) for v in expected.values())
    return max(float((full[k] - v).abs().max()) for k, v in expected.items()) / top, size


if __name__ == "__main__":
    found = {
        "split 1": run(None),
        "split 2": run(2),
        "split 4": run(1),
        "accumulate": run(1, accumulation=2),
        "oom rank 1": run(None, oom_on_rank_1=True),
        "oom rank 1 accumulate": run(None, accumulation=2, oom_on_rank_1=True),
        "oom rank 1 mid-forward": run(None, oom_on_rank_1=True, units=True),
        "oom rank 1 mid-forward accumulate": run(
            None, accumulation=2, oom_on_rank_1=True, units=True
        ),
        "oom rank 1 mid-backward": run(
            None, accumulation=2, oom_on_rank_1=True, units=True, in_backward=True
        ),
    }
    if torch.distributed.get_rank() == 0:
        with open(sys.argv[1], "w") as out:
            json.dump(found, out)
