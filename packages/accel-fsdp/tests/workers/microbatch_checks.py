"""``Accelerator.train_step`` (automatic micro-batching) under FSDP2 on 2 real gloo processes.

Variable-length sequences and a token-weighted loss; after 3 optimizer steps the full
parameters must equal plain PyTorch on the whole global batch (rank 0 writes the largest
relative difference and the final micro-batch size of each scenario as JSON to ``argv[1]``):

- ``split <n>``: every batch in ``n`` micro-batches per process from the first step;
- ``accumulate``: two accumulation steps per optimizer step, each split in 2 micro-batches, so
  that FSDP2's unsharded gradients of the first are carried into the reducing backward;
- ``oom rank 1``: rank 1 raises the CPU allocator's out-of-memory error on its whole batch
  after its forward (on the first step and after accumulated gradients); both ranks must split.
"""

from __future__ import annotations

import json
import sys

import torch
from accel import Accelerator, FullyShardedDataParallelPlugin
from accel.state import AcceleratorState, GradientState

torch.set_num_threads(1)
STEPS = 3
VOCAB, WIDTH, LENGTH, GLOBAL = 11, 8, 6, 8
OOM = "[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes."


def token_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Embedding(VOCAB, WIDTH), torch.nn.Tanh(), torch.nn.Linear(WIDTH, VOCAB)
    )


def token_batch(step: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    ids = torch.randint(0, VOCAB, (GLOBAL, LENGTH), generator=g)
    lengths = torch.randint(1, LENGTH + 1, (GLOBAL,), generator=g)
    labels = torch.randint(0, VOCAB, (GLOBAL, LENGTH), generator=g)
    labels[torch.arange(LENGTH)[None, :] >= lengths[:, None]] = -100
    return {"input_ids": ids, "labels": labels}


def token_loss(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    logits = model(batch["input_ids"])
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, VOCAB), batch["labels"].reshape(-1), ignore_index=-100
    )


def reference() -> dict[str, torch.Tensor]:
    model = token_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(STEPS):
        token_loss(model, token_batch(step)).backward()
        opt.step()
        opt.zero_grad()
    return model.state_dict()


def run(size: int | None, accumulation: int = 1, oom_on_rank_1: bool = False) -> tuple[float, int]:
    """``(largest relative difference to plain PyTorch, final micro-batch size)``."""
    AcceleratorState._reset_state()
    GradientState._reset_state()
    acc = Accelerator(
        fsdp_plugin=FullyShardedDataParallelPlugin(fsdp_version=2),
        gradient_accumulation_steps=accumulation,
    )
    model = token_model()
    model, opt = acc.prepare(model, torch.optim.SGD(model.parameters(), lr=0.5))
    acc.micro_batching.micro_batch_size = size
    whole = GLOBAL // acc.num_processes // accumulation

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
    expected = reference()
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
    }
    if torch.distributed.get_rank() == 0:
        with open(sys.argv[1], "w") as out:
            json.dump(found, out)
