"""N-D parallel training of a tiny model: FSDP2 sharding x tensor parallelism on one device mesh.

Run on 4 CPU processes (dp_shard=2 x tp=2 by default)::

    accel launch --cpu --num_processes 4 docs/examples/nd_parallel.py
    accel launch --cpu --num_processes 4 docs/examples/nd_parallel.py --dp-replicate-size 2 --tp-size 1

The sizes' product must equal the number of processes. The model brings its own
tensor-parallel plan (``tp_plan``); FSDP2 then shards it over the ``dp_shard_cp`` mesh.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile

import torch
import torch.distributed as dist
from accel import Accelerator, ParallelismConfig
from accel.utils import FullyShardedDataParallelPlugin, set_seed
from torch.utils.data import DataLoader, TensorDataset


class Block(torch.nn.Module):
    """An MLP block: ``up`` is split by columns, ``down`` by rows under tensor parallelism."""

    def __init__(self, width: int = 16, hidden: int = 64):
        super().__init__()
        self.up = torch.nn.Linear(width, hidden)
        self.down = torch.nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(x)))


class TinyModel(torch.nn.Module):
    """Embedding, four blocks, a head; ``tp_plan`` says how tensor parallelism splits it."""

    _no_split_modules = ["Block"]  # FSDP2 shards each block as its own unit
    tp_plan = {"blocks.*.up": "colwise", "blocks.*.down": "rowwise"}

    def __init__(self, width: int = 16, blocks: int = 4):
        super().__init__()
        self.inp = torch.nn.Linear(8, width)
        self.blocks = torch.nn.ModuleList(Block(width) for _ in range(blocks))
        self.head = torch.nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dp-replicate-size", type=int, default=1)
    parser.add_argument("--dp-shard-size", type=int, default=2)
    parser.add_argument("--tp-size", type=int, default=2)
    parser.add_argument("--num-steps", type=int, default=12)
    parser.add_argument("--save-dir", default=None, help="checkpoint folder (default: a temp dir)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    set_seed(42)
    parallelism_config = ParallelismConfig(
        dp_replicate_size=args.dp_replicate_size,
        dp_shard_size=args.dp_shard_size,
        tp_size=args.tp_size,
    )
    accelerator = Accelerator(
        parallelism_config=parallelism_config,
        fsdp_plugin=FullyShardedDataParallelPlugin(state_dict_type="SHARDED_STATE_DICT"),
    )
    mesh = accelerator.torch_device_mesh
    accelerator.print(f"mesh {mesh.mesh_dim_names} shape {tuple(mesh.shape)}")

    model = TinyModel()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    x = torch.randn(512, 8, generator=torch.Generator().manual_seed(0))
    data = TensorDataset(x, x.sum(dim=1, keepdim=True).sin())
    # batches are split over the data-parallel ranks only: the ranks of one TP group read the same
    loader = DataLoader(data, batch_size=16, shuffle=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    # the loss is averaged over the data-parallel (and context-parallel) ranks
    loss_group = mesh["dp_cp"].get_group() if parallelism_config.dp_cp_dim_names else None
    for step, (inputs, targets) in enumerate(loader):
        if step >= args.num_steps:
            break
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        loss = loss.detach()
        dist.all_reduce(loss, op=dist.ReduceOp.AVG, group=loss_group)
        if step % 4 == 0 or step == args.num_steps - 1:
            accelerator.print(f"step {step}: loss {loss.item():.4f}")

    # a sharded (DCP) checkpoint: it loads at any other layout or number of processes
    chosen = [args.save_dir or tempfile.mkdtemp(prefix="nd_parallel_")]
    dist.broadcast_object_list(chosen, src=0)  # every process writes into the main one's folder
    save_dir = chosen[0]
    accelerator.save_state(save_dir)
    accelerator.load_state(save_dir)
    full = accelerator.get_state_dict(model)  # gathered on the main process
    if accelerator.is_main_process:
        print(
            f"saved {save_dir}: {len(full)} tensors, blocks.0.up.weight {tuple(full['blocks.0.up.weight'].shape)}"
        )
    accelerator.wait_for_everyone()
    if args.save_dir is None and accelerator.is_main_process:
        shutil.rmtree(save_dir, ignore_errors=True)
    accelerator.print("nd_parallel: done")


if __name__ == "__main__":
    main()
