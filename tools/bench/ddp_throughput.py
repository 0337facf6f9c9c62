"""2-process DDP training throughput: accel (accel-ddp) vs a hand-written DistributedDataParallel loop.

Run: ``uv run python tools/bench/ddp_throughput.py`` (it starts itself on 2 gloo
processes through torchrun). Both loops run in the same processes, in interleaved
rounds; rank 0 prints the median steps per second of each and their ratio.
Target: accel >= 0.97x the hand-written loop.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def _model():
    import torch

    return torch.nn.Sequential(
        torch.nn.Linear(256, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    )


def _data(steps: int, batch: int):
    import torch

    g = torch.Generator().manual_seed(0)
    return torch.utils.data.TensorDataset(
        torch.randn(steps * batch * 2, 256, generator=g),
        torch.randint(0, 10, (steps * batch * 2,), generator=g),
    )


def plain_round(steps: int, batch: int) -> float:
    """Steps per second of a hand-written DDP loop over a DistributedSampler."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = DistributedDataParallel(_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = _data(steps, batch)
    sampler = torch.utils.data.distributed.DistributedSampler(data, shuffle=True, seed=0)
    loader = torch.utils.data.DataLoader(data, batch_size=batch, sampler=sampler)
    dist.barrier()
    start = time.perf_counter()
    for i, (x, y) in enumerate(loader):
        if i == steps:
            break
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    dist.barrier()
    return steps / (time.perf_counter() - start)


def accel_round(steps: int, batch: int) -> float:
    """Steps per second of the same loop through accel."""
    import torch
    import torch.distributed as dist
    from accel import Accelerator
    from accel.state import AcceleratorState, GradientState

    AcceleratorState._reset_state()
    GradientState._reset_state()
    accelerator = Accelerator()
    torch.manual_seed(0)
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(_data(steps, batch), batch_size=batch, shuffle=True)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    dist.barrier()
    start = time.perf_counter()
    for i, (x, y) in enumerate(loader):
        if i == steps:
            break
        loss = torch.nn.functional.cross_entropy(model(x), y)
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
    dist.barrier()
    return steps / (time.perf_counter() - start)


def worker(rounds: int, steps: int, batch: int) -> None:
    import torch.distributed as dist
    from accel import PartialState

    state = PartialState()
    results: dict[str, list[float]] = {"plain DDP": [], "accel": []}
    plain_round(5, batch)  # warm-up
    accel_round(5, batch)
    for r in range(rounds):
        order = ["plain DDP", "accel"] if r % 2 == 0 else ["accel", "plain DDP"]
        for name in order:
            results[name].append(
                (plain_round if name == "plain DDP" else accel_round)(steps, batch)
            )
    if state.is_main_process:
        base = statistics.median(results["plain DDP"])
        print(
            f"2 processes (gloo, CPU), batch {batch} per process, {rounds} rounds x {steps} steps"
        )
        for name, values in results.items():
            print(f"  {name:10s} median {statistics.median(values):8.1f} steps/s")
        ratios = [a / p for a, p in zip(results["accel"], results["plain DDP"])]
        print(
            f"  accel / plain DDP: median ratio {statistics.median(ratios):.3f}x (throughput of {statistics.median(results['accel']) / base:.3f}x; target >= 0.97x)"
        )
    dist.barrier()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    if "LOCAL_RANK" in os.environ:
        worker(args.rounds, args.steps, args.batch)
        return
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        __file__,
        *sys.argv[1:],
    ]
    env = {**os.environ, "ACCEL_USE_CPU": "1", "OMP_NUM_THREADS": "1"}
    sys.exit(subprocess.call(command, env=env))


if __name__ == "__main__":
    main()
