"""N-D parallelism on real gloo processes: ``nd_checks.py <mode> [checkpoint dir]``.

Every mode trains the tiny :class:`Net` on the same global batches as a plain one-process
reference built in the same process, and asserts the composed model matches it:

- ``tp``: tensor parallelism over all processes (2): loss and gradients equal the unsplit model's;
- ``fsdp_tp``: dp_shard=2 x tp=2 (4 processes); also loaders, gather_for_metrics, clipping;
  every parity mode also checks gather_for_metrics of objects and uneven tensors, and that
  ``split_between_processes`` and ``dispatch_batches=True`` split over the data-parallel ranks;
- ``hsdp``: dp_replicate=2 x dp_shard=2 (4 processes);
- ``save``: dp_shard=2 x tp=2 trains 2 steps and saves a sharded checkpoint;
- ``load4``: dp_shard=4 loads it, trains 2 more steps, saves again;
- ``load1``: one process loads that, trains 2 more steps: same weights as 6 uninterrupted steps.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist
from accel import Accelerator, FullyShardedDataParallelPlugin, ParallelismConfig
from accel.utils import set_seed
from torch.utils.data import DataLoader

GLOBAL_BATCH = 8
LR = 1e-2


class Block(torch.nn.Module):
    def __init__(self, width: int = 8, hidden: int = 16):
        super().__init__()
        self.up = torch.nn.Linear(width, hidden)
        self.down = torch.nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.down(torch.tanh(self.up(x)))


class Net(torch.nn.Module):
    """Two MLP blocks (column- then row-wise split under TP) and an unsplit head."""

    _no_split_modules = ["Block"]
    tp_plan = {"blocks.*.up": "colwise", "blocks.*.down": "rowwise"}

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(2))
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(GLOBAL_BATCH, 8, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def make_model() -> torch.nn.Module:
    set_seed(0)
    return Net()


class Reference:
    """The unsplit model trained on the whole global batch in this process."""

    def __init__(self):
        self.model = make_model()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=LR)
        self.losses: list[float] = []
        self.grads: list[dict[str, torch.Tensor]] = []
        self.norms: list[float] = []

    def step(self, step: int) -> None:
        x, y = batch(step)
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.grads.append({n: p.grad.clone() for n, p in self.model.named_parameters()})
        self.norms.append(float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1e9)))
        self.optimizer.step()
        self.optimizer.zero_grad()
        self.losses.append(loss.item())

    def run(self, steps: int) -> Reference:
        for step in range(steps):
            self.step(step)
        return self


def full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def accelerator_for(layout: dict[str, int] | None, sharded: bool = True) -> Accelerator:
    config = ParallelismConfig(**layout) if layout else None
    plugin = (
        FullyShardedDataParallelPlugin(state_dict_type="SHARDED_STATE_DICT") if sharded else None
    )
    return Accelerator(parallelism_config=config, fsdp_plugin=plugin)


def train_step(acc: Accelerator, model, optimizer, step: int) -> tuple[float, float]:
    """One optimizer step on this process's data-parallel share of the global batch."""
    x, y = batch(step)
    dp_size, dp_rank = acc.backend.data_parallel_shard()
    share = GLOBAL_BATCH // dp_size
    x, y = x[dp_rank * share : (dp_rank + 1) * share], y[dp_rank * share : (dp_rank + 1) * share]
    loss = torch.nn.functional.mse_loss(model(x), y)
    acc.backward(loss)
    norm = float(acc.clip_grad_norm_(model.parameters(), 1e9))
    optimizer.step()
    optimizer.zero_grad()
    # the loss averaged over the data-parallel ranks (TP peers computed the same one)
    mean = acc.reduce(loss.detach(), reduction="mean")
    return float(mean), norm


def check_weights(acc: Accelerator, model, reference: Reference, what: str) -> None:
    state = acc.get_state_dict(model)
    if acc.is_main_process:
        expected = reference.model.state_dict()
        assert set(state) == set(expected), (sorted(state), sorted(expected))
        for name, value in expected.items():
            torch.testing.assert_close(
                state[name], value, atol=2e-5, rtol=1e-4, msg=f"{what} {name}"
            )


def check_loaders(acc: Accelerator, layout: dict[str, int]) -> None:
    """Ranks of one TP group read the same batches, data-parallel ranks disjoint ones;
    gather_for_metrics gives every sample exactly once."""
    config = acc.parallelism_config
    loader = acc.prepare(DataLoader(torch.arange(20).float(), batch_size=2))
    seen = [b.tolist() for b in loader]
    everyone: list = [None] * acc.num_processes
    dist.all_gather_object(everyone, (acc.process_index, seen))
    mesh = acc.torch_device_mesh
    dp_rank = mesh["dp"].get_local_rank() if config.dp_dim_names else 0
    ranks: list = [None] * acc.num_processes
    dist.all_gather_object(ranks, dp_rank)
    by_dp: dict[int, list] = {}
    for (_, batches), rank in zip(everyone, ranks):
        by_dp.setdefault(rank, []).append(batches)
    assert len(by_dp) == config.data_parallel_size, by_dp.keys()
    for copies in by_dp.values():  # TP peers: identical
        assert all(c == copies[0] for c in copies), copies
    flat = sorted(v for copies in by_dp.values() for b in copies[0] for v in b)
    assert len(set(flat)) == len(flat) or len(flat) > 20, flat  # disjoint (up to even-out padding)
    gathered = torch.cat([acc.gather_for_metrics(b) for b in loader])
    assert sorted(gathered.tolist()) == list(map(float, range(20))), gathered.tolist()


def check_metrics(acc: Accelerator) -> None:
    """gather_for_metrics of python objects, with ``use_gather_object`` and of uneven tensors
    (``even_batches=False``): every sample once, in the order one process reads them
    (15 samples: the last round is padded, or uneven, on 2 and 4 data-parallel ranks)."""
    from accel.utils import gather_across_data_parallel_groups

    one_process = list(range(15))
    data = torch.arange(15)
    names: list = []
    objects: list = []
    for b in acc.prepare(DataLoader(data, batch_size=2)):
        names += acc.gather_for_metrics([f"s{v}" for v in b.tolist()])
        objects += acc.gather_for_metrics(list(b), use_gather_object=True)
    assert names == [f"s{v}" for v in one_process], names
    assert [int(t) for t in objects] == one_process, objects
    acc.even_batches = False
    try:
        uneven = [acc.gather_for_metrics({"x": b}) for b in acc.prepare(DataLoader(data, 2))]
    finally:
        acc.even_batches = True
    assert torch.cat([u["x"] for u in uneven]).tolist() == one_process, uneven
    # the free functions agree: one entry per data-parallel rank
    dp_size, dp_rank = acc.backend.data_parallel_shard()
    ranks = gather_across_data_parallel_groups(torch.tensor([dp_rank]))
    assert ranks.tolist() == list(range(dp_size)), ranks
    padded = acc.pad_across_processes(torch.ones(dp_rank + 1))
    assert padded.tolist() == [1.0] * (dp_rank + 1) + [0.0] * (dp_size - dp_rank - 1), padded


def _by_dp_rank(acc: Accelerator, value) -> dict[int, list]:
    """Every rank's ``value``, grouped by data-parallel rank (one list entry per TP / CP peer)."""
    dp_size, dp_rank = acc.backend.data_parallel_shard()
    everyone: list = [None] * acc.num_processes
    dist.all_gather_object(everyone, (dp_rank, value))
    grouped: dict[int, list] = {}
    for rank, item in everyone:
        grouped.setdefault(rank, []).append(item)
    assert sorted(grouped) == list(range(dp_size)), grouped.keys()
    assert all(len(peers) == acc.num_processes // dp_size for peers in grouped.values()), grouped
    return grouped


def check_split_and_dispatch(acc: Accelerator) -> None:
    """``split_between_processes`` and ``dispatch_batches=True`` cut over the data-parallel ranks:
    TP peers get the same share / batch, data-parallel ranks disjoint ones covering the input."""
    dp_size = acc.backend.data_parallel_shard()[0]
    inputs = list(range(11))  # uneven on 2 and 4 data-parallel ranks
    shares: dict[bool, list] = {}
    for pad in (False, True):
        with acc.split_between_processes(inputs, apply_padding=pad) as share:
            grouped = _by_dp_rank(acc, list(share))
        for peers in grouped.values():  # TP peers: the same share
            assert all(p == peers[0] for p in peers), (pad, grouped)
        shares[pad] = [grouped[r][0] for r in range(dp_size)]
    assert [v for s in shares[False] for v in s] == inputs, shares  # disjoint, in order, all
    longest = -(-len(inputs) // dp_size)
    padded = [s + [inputs[-1]] * (longest - len(s)) for s in shares[False]]
    assert shares[True] == padded, shares
    with acc.split_between_processes({"x": torch.arange(8), "y": list("abcdefgh")}) as share:
        grouped = _by_dp_rank(acc, (share["x"].tolist(), share["y"]))
    for peers in grouped.values():
        assert all(p == peers[0] for p in peers), grouped
    assert [v for r in range(dp_size) for v in grouped[r][0][0]] == list(range(8)), grouped

    acc.dataloader_config.dispatch_batches = True
    try:
        loader = acc.prepare(DataLoader(torch.arange(16).float(), batch_size=2))
        seen = [b.tolist() for b in loader]
    finally:
        acc.dataloader_config.dispatch_batches = False
    grouped = _by_dp_rank(acc, seen)
    for peers in grouped.values():  # TP peers: the same batches
        assert all(p == peers[0] for p in peers), grouped
    steps = 16 // (2 * dp_size)
    assert all(len(grouped[r][0]) == steps for r in range(dp_size)), grouped
    for step in range(steps):  # the data-parallel ranks' parts of one global batch: in order
        parts = [v for r in range(dp_size) for v in grouped[r][0][step]]
        assert parts == [float(v) for v in range(step * 2 * dp_size, (step + 1) * 2 * dp_size)], (
            step,
            grouped,
        )


def run_parity(layout: dict[str, int], steps: int = 3) -> None:
    acc = accelerator_for(layout, sharded=layout.get("dp_shard_size", 1) > 1)
    assert acc.distributed_type == "FSDP", acc.distributed_type
    mesh = acc.torch_device_mesh
    expected_dims = tuple(
        n for n in ("dp_replicate", "dp_shard", "tp") if layout.get(f"{n}_size", 1) > 1
    )
    assert mesh.mesh_dim_names == expected_dims, mesh.mesh_dim_names
    reference = Reference().run(steps)
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    model, optimizer = acc.prepare(model, optimizer)
    if layout.get("tp_size", 1) > 1:
        from torch.distributed.tensor import DTensor

        up = model.blocks[0].up.weight
        assert isinstance(up, DTensor) and "tp" in up.device_mesh.mesh_dim_names, type(up)
    for step in range(steps):
        x, y = batch(step)
        dp_size, dp_rank = acc.backend.data_parallel_shard()
        share = GLOBAL_BATCH // dp_size
        sl = slice(dp_rank * share, (dp_rank + 1) * share)
        loss = torch.nn.functional.mse_loss(model(x[sl]), y[sl])
        acc.backward(loss)
        if step == 0:  # gradients of the composed model = the unsplit model's
            for name, param in model.named_parameters():
                name = name.replace("_fsdp_wrapped_module.", "")
                torch.testing.assert_close(
                    full(param.grad), reference.grads[0][name], atol=1e-5, rtol=1e-4, msg=name
                )
        norm = float(acc.clip_grad_norm_(model.parameters(), 1e9))
        assert abs(norm - reference.norms[step]) < 1e-4 * max(1.0, reference.norms[step]), (
            norm,
            reference.norms[step],
        )
        optimizer.step()
        optimizer.zero_grad()
        mean = float(acc.reduce(loss.detach(), reduction="mean"))
        assert abs(mean - reference.losses[step]) < 1e-5, (step, mean, reference.losses[step])
    check_weights(acc, model, reference, "after training")
    check_loaders(acc, layout)
    check_metrics(acc)
    check_split_and_dispatch(acc)
    acc.print(f"ok parity {layout}")


def run_resume(mode: str, folder: Path) -> None:
    layouts = {
        "save": {"dp_shard_size": 2, "tp_size": 2},
        "load4": {"dp_shard_size": 4},
        "load1": None,
    }
    start, stop = {"save": (0, 2), "load4": (2, 4), "load1": (4, 6)}[mode]
    acc = accelerator_for(layouts[mode])
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    model, optimizer = acc.prepare(model, optimizer)
    if mode != "save":
        acc.load_state(str(folder / f"after_{start}"))
    for step in range(start, stop):
        train_step(acc, model, optimizer, step)
    check_weights(acc, model, Reference().run(stop), f"{mode} step {stop}")
    if mode != "load1":
        acc.save_state(str(folder / f"after_{stop}"))
    acc.wait_for_everyone()
    acc.print(f"ok {mode}")


def run_context_parallel() -> None:
    """cp_size=2: the mesh, the loaders (CP peers read the same batch) and the buffer sharding.

    The ring-attention kernels need a GPU (tools/gpu_check.py); here only the buffers are checked.
    """
    from accel_fsdp.nd import load_balanced_indices

    acc = accelerator_for({"cp_size": 2})
    config = acc.parallelism_config
    assert acc.torch_device_mesh.mesh_dim_names == ("cp",)
    assert acc.torch_device_mesh["dp_shard_cp"].size() == 2  # FSDP shards over the cp ranks
    assert acc.backend.data_parallel_shard() == (1, 0)
    assert config.cp_handler.cp_comm_strategy == "allgather"
    rank = acc.torch_device_mesh["cp"].get_local_rank()
    ids = torch.arange(2 * 16).reshape(2, 16)
    labels = ids.clone() + 100
    with acc.maybe_context_parallel(
        buffers=[ids, labels], buffer_seq_dims=[1, 1], no_restore_buffers={ids}
    ):
        keep = load_balanced_indices(16, rank, 2)
        assert ids.shape == (2, 8) and torch.equal(ids, torch.arange(32).reshape(2, 16)[:, keep]), (
            ids
        )
        assert torch.equal(labels, torch.arange(32).reshape(2, 16)[:, keep] + 100)
        # every position is on exactly one rank
        everyone: list = [None] * acc.num_processes
        dist.all_gather_object(everyone, ids[0].tolist())
        assert sorted(v for part in everyone for v in part) == list(range(16)), everyone
    assert labels.shape == (2, 16) and torch.equal(labels, torch.arange(32).reshape(2, 16) + 100)
    assert ids.shape == (2, 8)  # in no_restore_buffers: left sharded
    try:
        with acc.maybe_context_parallel(buffers=[torch.zeros(1, 6)], buffer_seq_dims=[1]):
            raise AssertionError("a length not divisible by 2 x cp_size was accepted")
    except ValueError as error:
        assert "divisible by 2 x cp_size = 4" in str(error), error
    acc.print("ok cp")


def main() -> None:
    mode = sys.argv[1]
    layouts = {
        "tp": {"tp_size": 2},
        "fsdp_tp": {"dp_shard_size": 2, "tp_size": 2},
        "hsdp": {"dp_replicate_size": 2, "dp_shard_size": 2},
    }
    if mode == "cp":
        run_context_parallel()
    elif mode in layouts:
        run_parity(layouts[mode])
    else:
        run_resume(mode, Path(sys.argv[2]))


if __name__ == "__main__":
    main()
