"""``Accelerator.trigger_sync_in_backward`` on 2 real gloo processes (issue 19).

Forwards run under ``no_sync``, their backwards outside it, the last one inside
``trigger_sync_in_backward``: the gradients must then equal those of one reference
model trained on the whole global batch. Rank 0 prints ``ok <name>`` per passed check.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from accel import Accelerator, DistributedDataParallelKwargs
from accel.state import AcceleratorState, GradientState

GLOBAL_BATCH = 8
MICRO_BATCHES = 2


def fresh(**kwargs) -> Accelerator:
    AcceleratorState._reset_state()
    GradientState._reset_state()
    return Accelerator(**kwargs)


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def global_batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(GLOBAL_BATCH, 4, generator=g), torch.randn(GLOBAL_BATCH, 1, generator=g)


def reference_grads() -> list[torch.Tensor]:
    """One process, plain PyTorch, the whole global batch in one backward."""
    model = make_model()
    x, y = global_batch()
    torch.nn.functional.mse_loss(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


def local_micro_batches(acc: Accelerator) -> list[tuple[torch.Tensor, torch.Tensor]]:
    x, y = global_batch()
    per_rank = GLOBAL_BATCH // acc.num_processes
    lo = acc.process_index * per_rank
    xs = x[lo : lo + per_rank].chunk(MICRO_BATCHES)
    ys = y[lo : lo + per_rank].chunk(MICRO_BATCHES)
    return list(zip(xs, ys))


def run(acc: Accelerator, trigger: bool) -> tuple[torch.nn.Module, list[torch.Tensor]]:
    """Forwards under no_sync, backwards after; the last one in trigger_sync_in_backward if ``trigger``."""
    model = acc.prepare(make_model())
    losses = []
    with acc.no_sync(model):
        for x, y in local_micro_batches(acc):
            losses.append(torch.nn.functional.mse_loss(model(x), y) / MICRO_BATCHES)
    for loss in losses[:-1]:
        acc.backward(loss)
    if trigger:
        with acc.trigger_sync_in_backward(model):
            acc.backward(losses[-1])
    else:
        acc.backward(losses[-1])
    return model, [p.grad.clone() for p in model.parameters()]


def assert_grads_equal(got: list[torch.Tensor], want: list[torch.Tensor], what: str) -> None:
    for i, (g, w) in enumerate(zip(got, want)):
        assert torch.allclose(g, w, atol=1e-6), f"{what}: grad {i} differs by {(g - w).abs().max()}"


def check_reference(**ddp_kwargs) -> None:
    acc = fresh(
        kwargs_handlers=[DistributedDataParallelKwargs(**ddp_kwargs)] if ddp_kwargs else None
    )
    assert acc.num_processes == 2 and type(acc.backend).__name__ == "DDPBackend", acc
    model, grads = run(acc, trigger=True)
    assert_grads_equal(grads, reference_grads(), f"trigger_sync_in_backward {ddp_kwargs}")
    # the block restores no_sync's state for the model, and later steps sync as usual
    assert model.require_backward_grad_sync
    model.zero_grad()
    x, y = local_micro_batches(acc)[0]
    acc.backward(torch.nn.functional.mse_loss(model(x), y))
    gathered = [torch.empty_like(model.module[0].weight.grad) for _ in range(2)]
    dist.all_gather(gathered, model.module[0].weight.grad)
    assert torch.equal(gathered[0], gathered[1]), "a plain step after the block did not sync"


def check_default() -> None:
    check_reference()


def check_bucket_view() -> None:
    check_reference(gradient_as_bucket_view=True, bucket_cap_mb=1)


def check_find_unused() -> None:
    """With find_unused_parameters=True the reducer is armed by the loss of accelerator.backward."""
    check_reference(find_unused_parameters=True)


def check_without_trigger_differs() -> None:
    """The control: without the block the ranks keep their own local gradients (the test can fail)."""
    acc = fresh()
    _, grads = run(acc, trigger=False)
    other = [torch.empty_like(g) for g in grads]
    for g, o in zip(grads, other):
        dist.broadcast(o.copy_(g), src=1)
    if acc.process_index == 0:
        assert not all(torch.allclose(g, o) for g, o in zip(grads, other)), (
            "ranks' grads already equal"
        )


CHECKS = {
    "default": check_default,
    "bucket_view": check_bucket_view,
    "find_unused": check_find_unused,
    "control": check_without_trigger_differs,
}


if __name__ == "__main__":
    for name in sys.argv[1:] or list(CHECKS):
        CHECKS[name]()
        dist.barrier()
        if dist.get_rank() == 0:
            print(f"ok {name}", flush=True)
