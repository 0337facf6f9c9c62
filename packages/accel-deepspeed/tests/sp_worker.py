"""Worker of test_sequence_parallel.py, started by ``accel launch`` on 2 processes (DeepSpeed, gloo, CPU).

``python sp_worker.py layout OUT``: a plain torch model; records the layout, DeepSpeed's
groups and the slices each rank's loader yields. ``python sp_worker.py train OUT``: a
tiny random Llama (transformers) trained with Ulysses attention; rank 0 also trains a
copy in plain PyTorch on the full sequences first, and writes both runs' losses and
final weights.
"""

from __future__ import annotations

import copy
import json
import os
import sys

import torch
from accel import Accelerator, ParallelismConfig
from accel.parallelism_config import DeepSpeedSequenceParallelConfig

SEQ, SAMPLES, BATCH, STEPS, LR = 16, 6, 2, 3, 0.5


def sequences() -> list[dict[str, torch.Tensor]]:
    """Sample ``i``: token ids ``i * 100 + position`` (layout) - recognisable after slicing."""
    return [{"input_ids": torch.arange(SEQ) + 100 * i} for i in range(SAMPLES)]


def layout(out: str) -> None:
    """Groups, data-parallel shard and per-rank slices of a plain model's run."""
    config = ParallelismConfig(sp_size=2)
    accelerator = Accelerator(parallelism_config=config)
    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(sequences(), batch_size=BATCH)
    engine, _, loader = accelerator.prepare(model, optimizer, loader)
    from accel_deepspeed import sequence_parallel_group

    group = sequence_parallel_group()
    backend = accelerator.backend
    batches = [{k: v.tolist() for k, v in batch.items()} for batch in loader]
    record = {
        "rank": accelerator.process_index,
        "sp_rank": backend.sequence_parallel.sp_rank,
        "data_parallel_shard": list(backend.data_parallel_shard()),
        "group_ranks": torch.distributed.get_process_group_ranks(group),
        "engine_sp_size": engine.sequence_parallel_size,
        "engine_seq_dp_world_size": engine.seq_dp_world_size,
        "train_batch_size": engine.train_batch_size(),
        "batches": batches,
    }
    with open(f"{out}.{accelerator.process_index}.json", "w") as f:
        json.dump(record, f)


def tiny_llama() -> torch.nn.Module:
    """A 2-layer Llama with GQA (4 query heads, 2 key/value heads), randomly initialised, sdpa."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(config)


def token_batches() -> list[dict[str, torch.Tensor]]:
    """Random tokens; the first 5 labels of each sequence ignored, so the slices weigh differently."""
    generator = torch.Generator().manual_seed(1)
    samples = []
    for _ in range(SAMPLES):
        ids = torch.randint(0, 64, (SEQ,), generator=generator)
        labels = ids.clone()
        labels[:5] = -100
        samples.append({"input_ids": ids, "labels": labels})
    return samples


def reference(model: torch.nn.Module) -> tuple[list[float], dict[str, list]]:
    """Plain PyTorch, one process, the full sequences: losses and final weights."""
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    loader = torch.utils.data.DataLoader(token_batches(), batch_size=BATCH)
    losses = []
    for batch in loader:
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, {k: v.tolist() for k, v in model.state_dict().items()}


def train(out: str) -> None:
    """Ulysses SP over 2 ranks against :func:`reference`."""
    from accel_deepspeed import sequence_parallel_loss

    model = tiny_llama()
    want = reference(copy.deepcopy(model)) if os.environ.get("RANK", "0") == "0" else None
    config = ParallelismConfig(
        sp_size=2, sp_handler=DeepSpeedSequenceParallelConfig(sp_attn_implementation="sdpa")
    )
    accelerator = Accelerator(parallelism_config=config)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    loader = torch.utils.data.DataLoader(token_batches(), batch_size=BATCH)
    engine, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    losses, slices = [], []
    for batch in loader:
        slices.append(batch["input_ids"].shape[1])
        out_ = engine(**batch)
        loss = sequence_parallel_loss(out_.loss, batch["shift_labels"])
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    state = accelerator.get_state_dict(engine)
    if accelerator.is_main_process:
        got = (losses, {k: v.tolist() for k, v in state.items()})
        with open(out, "w") as f:
            json.dump({"got": got, "want": want, "slice_lengths": slices}, f)


if __name__ == "__main__":
    {"layout": layout, "train": train}[sys.argv[1]](sys.argv[2])
