"""``Accelerator.train_step``: automatic micro-batching with exact gradients, one process (issue 44).

Out-of-memory errors are raised directly by the step here (unit tests), except in
``test_real_allocator_error_in_a_capped_process``, whose child process gets the CPU allocator's
own error from a capped address space. The 2-process runs are in accel-ddp's and accel-fsdp's tests.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from accel import Accelerator, ProjectConfiguration, ThroughputKwargs
from accel.errors import ConfigError, UsageError
from accel.microbatch import MicroBatchOutOfMemoryError, grow_after_setting, split_batch

OOM = "[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes."
WORKERS = Path(__file__).parent / "workers"
STEPS, BATCH = 4, 8


def data(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(step)
    return torch.randn(BATCH, 4, generator=g), torch.randn(BATCH, 2, generator=g)


def train(
    start: int | None = None,
    limit: int | None = None,
    accumulation: int = 1,
    steps: int = STEPS,
    grow_after: int = 0,
    **accelerator_kwargs,
):
    """Train ``steps`` batches; the step raises out-of-memory on micro-batches over ``limit``."""
    torch.manual_seed(0)
    acc = Accelerator(cpu=True, gradient_accumulation_steps=accumulation, **accelerator_kwargs)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    model, opt = acc.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
    acc.micro_batching.micro_batch_size = start
    acc.micro_batching.grow_after = grow_after
    seen: list[int] = []

    def step(micro):
        x, y = micro
        seen.append(len(x))
        out = model(x)  # the partial forward of a failed attempt leaves nothing behind
        if limit is not None and len(x) > limit:
            acc.backward(out.sum() * 0)  # even a partial backward
            raise RuntimeError(OOM)
        loss = torch.nn.functional.mse_loss(out, y)
        acc.backward(loss)
        return loss

    losses = []
    for index in range(steps):
        with acc.accumulate(model):
            losses.append(float(acc.train_step(step, data(index))))
            opt.step()
            opt.zero_grad()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return flat, losses, acc, seen


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("accumulation", [1, 2])
def test_split_after_out_of_memory_is_exact(accumulation, caplog):
    count_all = {"kwargs_handlers": [ThroughputKwargs(warmup_steps=0)]}
    never, never_losses, never_acc, _ = train(accumulation=accumulation, **count_all)
    final, _, _, _ = train(start=2, accumulation=accumulation)
    with caplog.at_level(logging.WARNING, logger="accel.microbatch"):
        split, split_losses, acc, seen = train(limit=2, accumulation=accumulation, **count_all)
    assert relative(split, never) <= 1e-6 and relative(final, never) <= 1e-6
    assert split_losses == pytest.approx(never_losses, rel=1e-6)
    assert acc.micro_batching.micro_batch_size == 2
    # the throughput monitor takes back the failed attempts' forwards: each sample counts once
    counted, reference = acc.throughput.summary(), never_acc.throughput.summary()
    assert counted["samples"] == reference["samples"] == STEPS * BATCH
    assert counted["steps"] == reference["steps"] == STEPS // accumulation
    # step 1: 8 (fails), 4 (fails), then 4 micro-batches of 2; later steps: 2s only
    assert seen[:6] == [8, 4, 2, 2, 2, 2] and set(seen[6:]) == {2}
    assert len(seen) == 6 + (STEPS - 1) * 4  # no sample skipped or seen twice after the split
    assert [r.getMessage() for r in caplog.records] == [
        "out of memory with micro-batch 8: now 2 micro-batches of 4",
        "out of memory with micro-batch 4: now 4 micro-batches of 2",
    ]


def test_token_weighted_loss_equals_the_whole_batch():
    """8 variable-length sequences in 8 micro-batches (8x1) give the whole batch's token mean."""
    torch.manual_seed(0)
    vocab = 7
    ids = torch.randint(0, vocab, (8, 5))
    labels = torch.randint(0, vocab, (8, 5))
    labels[torch.arange(5)[None, :] >= torch.randint(1, 6, (8,))[:, None]] = -100

    def loss_of(model, batch):
        return torch.nn.functional.cross_entropy(
            model(batch["input_ids"]).reshape(-1, vocab),
            batch["labels"].reshape(-1),
            ignore_index=-100,
        )

    def gradient(size, count_items):
        torch.manual_seed(1)
        acc = Accelerator(cpu=True)
        model = acc.prepare(
            torch.nn.Sequential(torch.nn.Embedding(vocab, 4), torch.nn.Linear(4, vocab))
        )
        acc.micro_batching.micro_batch_size = size

        def step(micro):
            loss = loss_of(model, micro)
            acc.backward(loss)
            return loss

        loss = acc.train_step(step, {"input_ids": ids, "labels": labels}, count_items=count_items)
        return torch.cat([p.grad.reshape(-1) for p in model.parameters()]), float(loss)

    torch.manual_seed(1)
    plain = torch.nn.Sequential(torch.nn.Embedding(vocab, 4), torch.nn.Linear(4, vocab))
    whole_loss = loss_of(plain, {"input_ids": ids, "labels": labels})
    whole_loss.backward()
    whole = torch.cat([p.grad.reshape(-1) for p in plain.parameters()])
    tokens = lambda b: (b["labels"] != -100).sum()  # noqa: E731
    split, loss = gradient(1, tokens)
    assert relative(split, whole) <= 1e-6 and loss == pytest.approx(float(whole_loss), rel=1e-6)
    by_samples, _ = gradient(1, None)  # weighting by samples is not the token mean
    assert relative(by_samples, whole) > 1e-3


def test_micro_batch_of_one_that_does_not_fit_ends_the_run():
    with pytest.raises(MicroBatchOutOfMemoryError, match="micro-batch of 1 sample"):
        train(limit=0, steps=1)


def test_other_errors_are_not_retried():
    acc = Accelerator(cpu=True)
    acc.prepare(torch.nn.Linear(2, 1))
    calls = []

    def step(micro):
        calls.append(len(micro))
        raise ValueError("a bug in the step")

    with pytest.raises(ValueError, match="a bug"):
        acc.train_step(step, torch.zeros(8, 2))
    assert calls == [8] and acc.micro_batching.micro_batch_size is None


def test_split_is_tried_larger_again(caplog):
    with caplog.at_level(logging.WARNING, logger="accel.microbatch"):
        _, _, acc, seen = train(limit=4, steps=6, grow_after=2)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "out of memory with micro-batch 8: now 2 micro-batches of 4",
        "micro-batch 4 fitted for 2 steps: trying 1 micro-batch of 8",
        "out of memory with micro-batch 8: now 2 micro-batches of 4",
        "micro-batch 4 fitted for 2 steps: trying 1 micro-batch of 8",
        "out of memory with micro-batch 8: now 2 micro-batches of 4",
    ]
    assert acc.micro_batching.micro_batch_size == 4


def test_grow_after_is_a_declared_setting(monkeypatch):
    monkeypatch.delenv("ACCEL_MICRO_BATCH_GROW_AFTER", raising=False)
    monkeypatch.delenv("ACCEL_LAUNCH_CONFIG", raising=False)
    assert grow_after_setting() == 1000
    monkeypatch.setenv("ACCEL_MICRO_BATCH_GROW_AFTER", "50")
    assert grow_after_setting() == 50 and Accelerator(cpu=True).micro_batching.grow_after == 50
    monkeypatch.setenv("ACCEL_MICRO_BATCH_GROW_AFTER", "often")
    with pytest.raises(
        ConfigError, match="ACCEL_MICRO_BATCH_GROW_AFTER.*'often' is not an integer"
    ):
        grow_after_setting()


def test_split_is_saved_and_resumed(tmp_path):
    config = ProjectConfiguration(project_dir=str(tmp_path), automatic_checkpoint_naming=True)
    _, _, acc, _ = train(limit=4, steps=1, project_config=config)
    acc.save_state()
    _, _, fresh, _ = train(steps=0, project_config=config)
    assert fresh.micro_batching.micro_batch_size is None
    assert fresh.resume() is not None
    assert fresh.micro_batching.micro_batch_size == 4
    assert fresh.micro_batching.state_dict() == {"micro_batch_size": 4, "steps_at_size": 1}


def test_bad_input_says_what_to_do():
    acc = Accelerator(cpu=True)
    with pytest.raises(UsageError, match="needs the models the step trains"):
        acc.train_step(lambda b: None, torch.zeros(2, 1))
    acc.prepare(torch.nn.Linear(1, 1))
    with pytest.raises(UsageError, match="reduction='max'"):
        acc.train_step(lambda b: None, torch.zeros(2, 1), reduction="max")
    with pytest.raises(UsageError, match="batch holding tensors"):
        acc.train_step(lambda b: None, ["not", "tensors"])

    def plain_backward(batch):
        loss = acc.prepared.models[0](batch).sum()
        loss.backward()  # not accelerator.backward: the weight would be missing
        return loss

    with pytest.raises(UsageError, match=r"must call accelerator.backward\(loss\)"):
        acc.train_step(plain_backward, torch.zeros(2, 1))
    with pytest.raises(UsageError, match="needs count_items"):
        acc.train_step(lambda b: None, torch.zeros(2, 1), num_items_in_batch=4)


def test_split_batch_keeps_every_sample_once_in_order():
    batch = {
        "x": torch.arange(10),
        "meta": "same",
        "pair": (torch.arange(10) * 2, torch.tensor(3.0)),
    }
    pieces = split_batch(batch, 4)
    assert [n for _, n in pieces] == [3, 3, 2, 2]
    assert torch.cat([p["x"] for p, _ in pieces]).tolist() == list(range(10))
    assert all(p["meta"] == "same" and float(p["pair"][1]) == 3.0 for p, _ in pieces)


def test_real_allocator_error_in_a_capped_process():
    """A child process capped with RLIMIT_AS gets the CPU allocator's RuntimeError and splits."""
    done = subprocess.run(
        [sys.executable, str(WORKERS / "capped_microbatch.py")],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "DefaultCPUAllocator: can't allocate memory" in done.stdout, done.stdout
    assert "out of memory with micro-batch 8: now 2 micro-batches of 4" in done.stderr
    assert "ok" in done.stdout.splitlines()[-1], done.stdout
