"""Started by ``accel launch --tpu --num_processes 2``: collectives between two replicas.

Skipped on PJRT CPU, where any cross-replica collective aborts (pytorch/xla#5005, #9089);
runs on a real TPU (TEST_PJRT_DEVICE=TPU). Each replica writes ``<ordinal>.json``.
"""

import json
import sys
from pathlib import Path

import torch


def main():
    from accel import Accelerator

    out = Path(sys.argv[1])
    acc = Accelerator()
    rank, world = acc.process_index, acc.num_processes
    gathered = acc.gather(torch.tensor([float(rank)], device=acc.device)).cpu().tolist()
    assert gathered == [float(r) for r in range(world)], gathered
    total = acc.reduce(torch.tensor(float(rank), device=acc.device), "sum").item()
    mean = acc.reduce(torch.tensor(float(rank), device=acc.device), "mean").item()
    assert total == sum(range(world)) and abs(mean - total / world) < 1e-6
    torch.manual_seed(0)  # same data and initial weights everywhere; each replica gets its shard
    X = torch.randn(32, 4)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(X), batch_size=4, shuffle=True
    )
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer, loader = acc.prepare(model, optimizer, loader)
    firsts = []
    for (x,) in loader:
        firsts.append(x[0, 0].item())
        acc.backward(model(x).pow(2).mean())
        acc.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
    weights = acc.gather(model.weight.detach()).cpu()
    # different shards, same weights: the gradients were averaged over the replicas
    assert torch.allclose(weights[0], weights[1]), weights
    acc.wait_for_everyone()
    (out / f"{rank}.json").write_text(json.dumps({"rank": rank, "firsts": firsts}))


if __name__ == "__main__":
    raise SystemExit("run me with accel launch --tpu")
