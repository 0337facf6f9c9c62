"""Cost of ``accelerator.throughput`` against the same training step without it (target <= 0.5%).

Two Accelerators in one process train the same small token model (embedding, MLP, output
layer; width 64, vocabulary 512; batches of 8 x 64 tokens with an attention mask) on CPU, one with the monitor
(``log_every=10``: a report, which reads the token count back, every 10 steps) and one with
``ThroughputKwargs(enabled=False)``. Rounds of steps alternate between the two; the
medians of the rounds are compared. Because the difference is far below this machine's
noise, the monitor's own work per step (the forward hook, the step hook and a tenth of a
report) is also timed alone and divided by the median step.

    uv run python tools/bench/throughput_overhead.py [--rounds 15] [--steps 20]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from accel import Accelerator, ThroughputKwargs

VOCAB, WIDTH, BATCH, LENGTH = 512, 64, 8, 64


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Embedding(VOCAB, WIDTH),
        torch.nn.Linear(WIDTH, 4 * WIDTH),
        torch.nn.GELU(),
        torch.nn.Linear(4 * WIDTH, WIDTH),
        torch.nn.Linear(WIDTH, VOCAB),
    )


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = model()

    def forward(self, input_ids, attention_mask):
        logits = self.body(input_ids)
        return (logits.logsumexp(-1) * attention_mask).sum() / attention_mask.sum()


def setup(enabled: bool):
    accelerator = Accelerator(
        cpu=True, kwargs_handlers=[ThroughputKwargs(enabled=enabled, log_every=10)]
    )
    net = Model()
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    net, optimizer = accelerator.prepare(net, optimizer)
    return accelerator, net, optimizer


def batch() -> dict[str, torch.Tensor]:
    mask = torch.ones(BATCH, LENGTH, dtype=torch.long)
    mask[:, LENGTH // 2 :] = torch.randint(0, 2, (BATCH, LENGTH - LENGTH // 2))
    return {"input_ids": torch.randint(0, VOCAB, (BATCH, LENGTH)), "attention_mask": mask}


def run(accelerator, net, optimizer, data, steps: int) -> float:
    start = time.perf_counter()
    for i in range(steps):
        loss = net(**data[i % len(data)])
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    return (time.perf_counter() - start) / steps


def monitor_work(accelerator, net, data, calls: int = 2000) -> float:
    """Seconds of the monitor's own work per step: one forward hook, one step hook, 1/10 report."""
    monitor = accelerator.throughput
    start = time.perf_counter()
    for i in range(calls):
        monitor._on_forward(net, (), data[i % len(data)])
    hook = (time.perf_counter() - start) / calls
    start = time.perf_counter()
    for _ in range(calls):
        monitor.optimizer_step()
    step = (time.perf_counter() - start) / calls  # includes a report every 10th call
    return hook + step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)  # one core each, as a worker process of a launch gets
    data = [batch() for _ in range(8)]
    on, off = setup(True), setup(False)
    for variant in (on, off):
        run(*variant, data, 5)  # warm-up
    with_monitor, without = [], []
    for r in range(args.rounds):  # alternate which goes first: neither gets the warmer cache
        for variant in (on, off) if r % 2 == 0 else (off, on):
            (with_monitor if variant is on else without).append(run(*variant, data, args.steps))
    a, b = statistics.median(with_monitor), statistics.median(without)
    work = monitor_work(on[0], on[1], data)
    print(f"step with throughput monitor:    {a * 1e3:8.3f} ms (median of {args.rounds} rounds)")
    print(f"step without (enabled=False):    {b * 1e3:8.3f} ms")
    print(f"side by side: with / without = {a / b:.4f}")
    print(f"monitor's own work per step: {work * 1e6:.1f} us = {work / b:.3%} of the step")


if __name__ == "__main__":
    main()
