"""Checks of accel-ddp on 2 real processes; every assertion runs inside the workers."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import torch
import torch.distributed as dist
from accel import Accelerator, DDPCommunicationHookType, DistributedDataParallelKwargs
from accel.state import AcceleratorState, GradientState
from accel.utils import set_seed
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.utils.data import DataLoader, TensorDataset


def fresh(**kwargs) -> Accelerator:
    AcceleratorState._reset_state()
    GradientState._reset_state()
    return Accelerator(**kwargs)


def make_data(n: int = 32) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    y = x @ torch.randn(8, 1, generator=g) + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


def make_model() -> torch.nn.Module:
    set_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def reference(global_batch: int, steps_per_update: int = 1) -> torch.nn.Module:
    """One process, plain PyTorch, global batch; one update per ``steps_per_update`` global batches."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = make_data()
    batches = list(DataLoader(data, batch_size=global_batch))
    for i in range(0, len(batches), steps_per_update):
        group = batches[i : i + steps_per_update]
        for x, y in group:
            loss = torch.nn.functional.mse_loss(model(x), y) / len(group)
            loss.backward()
        opt.step()
        opt.zero_grad()
    return model


def train(accelerator: Accelerator, per_process_batch: int) -> torch.nn.Module:
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    dl = DataLoader(make_data(), batch_size=per_process_batch)
    model, opt, dl = accelerator.prepare(model, opt, dl)
    for x, y in dl:
        with accelerator.accumulate(model):
            loss = torch.nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
    return accelerator.unwrap_model(model)


def assert_same(a: torch.nn.Module, b: torch.nn.Module, what: str) -> None:
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.allclose(p, q, atol=1e-6), f"{what}: {name} differs by {(p - q).abs().max()}"


def check_parity() -> None:
    acc = fresh()
    assert acc.num_processes == 2 and acc.distributed_type == "MULTI_CPU", acc
    assert type(acc.backend).__name__ == "DDPBackend"
    assert_same(train(acc, 4), reference(8), "DDP batch 4x2 vs one process batch 8")
    acc = fresh(gradient_accumulation_steps=2)
    assert_same(train(acc, 4), reference(8, steps_per_update=2), "DDP + accumulation 2")


def check_accumulation_skips_allreduce() -> None:
    acc = fresh(gradient_accumulation_steps=4)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    dl = DataLoader(make_data(32), batch_size=2)  # 8 batches per process -> 2 synchronising steps
    model, opt, dl = acc.prepare(model, opt, dl)
    calls = []

    def counting_hook(state, bucket):
        calls.append(bucket.buffer().numel())
        return default_hooks.allreduce_hook(state, bucket)

    model.register_comm_hook(None, counting_hook)
    for x, y in dl:
        with acc.accumulate(model):
            acc.backward(torch.nn.functional.mse_loss(model(x), y))
            opt.step()
            opt.zero_grad()
    assert len(calls) == 2, (
        f"expected 2 all-reduces for 8 micro-batches with accumulation 4, saw {len(calls)}"
    )


def check_comm_hooks() -> None:
    cases = [
        (DDPCommunicationHookType.FP16, DDPCommunicationHookType.NO, {}, torch.float16),
        (DDPCommunicationHookType.BF16, DDPCommunicationHookType.NO, {}, torch.bfloat16),
        (
            DDPCommunicationHookType.POWER_SGD,
            DDPCommunicationHookType.NO,
            {"start_powerSGD_iter": 2, "matrix_approximation_rank": 1},
            "low-rank",
        ),
        (
            DDPCommunicationHookType.BATCHED_POWER_SGD,
            DDPCommunicationHookType.NO,
            {"start_powerSGD_iter": 2, "matrix_approximation_rank": 1},
            "low-rank",
        ),
        (
            DDPCommunicationHookType.POWER_SGD,
            DDPCommunicationHookType.FP16,
            {"start_powerSGD_iter": 2, "matrix_approximation_rank": 1},
            torch.float16,
        ),
    ]
    original = dist.all_reduce
    for hook, wrapper, options, expected in cases:
        seen: list[tuple[torch.dtype, int]] = []

        def spy(tensor, *args, seen=seen, **kwargs):
            seen.append((tensor.dtype, tensor.numel()))
            return original(tensor, *args, **kwargs)

        handler = DistributedDataParallelKwargs(
            comm_hook=hook, comm_wrapper=wrapper, comm_state_option=options
        )
        acc = fresh(kwargs_handlers=[handler])
        model = make_model()
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        dl = DataLoader(make_data(64), batch_size=4)
        model, opt, dl = acc.prepare(model, opt, dl)
        full = sum(p.numel() for p in model.parameters())
        losses = []
        dist.all_reduce = spy
        try:
            for _ in range(3):
                for x, y in dl:
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    acc.backward(loss)
                    opt.step()
                    opt.zero_grad()
                    losses.append(loss.item())
        finally:
            dist.all_reduce = original
        assert seen, f"{hook}: the hook never communicated"
        if expected == "low-rank":
            late = seen[-3:]
            assert all(numel < full for _, numel in late), (
                f"{hook}: expected compressed low-rank traffic, saw {late} for {full} params"
            )
        else:
            assert any(dtype == expected for dtype, _ in seen), (
                f"{hook}/{wrapper}: expected {expected} traffic, saw {set(d for d, _ in seen)}"
            )
        first, last = sum(losses[:4]) / 4, sum(losses[-4:]) / 4
        assert last < first, f"{hook}: training did not converge ({first} -> {last})"


def check_local_sgd() -> None:
    from accel_ddp import LocalSGD

    acc = fresh()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    dl = DataLoader(make_data(48), batch_size=2)
    model, opt, dl = acc.prepare(model, opt, dl)

    def params_equal_across_ranks() -> bool:
        flat = torch.cat([p.detach().flatten() for p in acc.unwrap_model(model).parameters()])
        both = [torch.zeros_like(flat) for _ in range(2)]
        dist.all_gather(both, flat)
        return torch.equal(both[0], both[1])

    with LocalSGD(accelerator=acc, model=model, local_sgd_steps=4, enabled=True) as local_sgd:
        for step, (x, y) in enumerate(dl, start=1):
            acc.backward(torch.nn.functional.mse_loss(model(x), y))
            opt.step()
            opt.zero_grad()
            local_sgd.step()
            if step % 4 == 0:
                assert params_equal_across_ranks(), f"step {step}: parameters should be averaged"
            else:
                assert not params_equal_across_ranks(), (
                    f"step {step}: parameters should differ between averaging points"
                )
    assert params_equal_across_ranks()


def check_missing_plugin_message() -> None:
    from accel.catalog import DISTRIBUTED_TYPES

    assert DISTRIBUTED_TYPES["MULTI_CPU"].package == "accel-ddp"


def check_join_uneven_inputs() -> None:
    acc = fresh()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    dl = DataLoader(
        make_data(10), batch_size=2
    )  # 5 batches: 3 on rank 0, 2 on rank 1 without even_batches
    model, opt, dl = acc.prepare(model, opt, dl)
    seen = 0
    with acc.join_uneven_inputs([model], even_batches=False):
        for x, y in dl:
            acc.backward(torch.nn.functional.mse_loss(model(x), y))
            opt.step()
            opt.zero_grad()
            seen += 1
    assert seen == (3 if acc.process_index == 0 else 2), seen
    assert acc.even_batches


def _resume_run(
    folder: str, stop_after: int | None, resume: bool, async_save: bool = False
) -> torch.nn.Module:
    acc = fresh()
    set_seed(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.Dropout(0.2), torch.nn.Linear(16, 1)
    )
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    dl = DataLoader(make_data(40), batch_size=2, shuffle=True)
    model, opt, dl, sched = acc.prepare(model, opt, dl, sched)
    if resume:
        acc.load_state(folder)
    steps = 0
    for _ in range(dl.epoch, 3):
        for x, y in dl:
            acc.backward(torch.nn.functional.mse_loss(model(x), y))
            opt.step()
            sched.step()
            opt.zero_grad()
            steps += 1
            if stop_after is not None and steps == stop_after:
                acc.save_state(folder, async_save=async_save)
                if (
                    async_save
                ):  # the loop goes on (changing every tensor) while the files are written
                    for x, y in list(dl)[:3]:
                        acc.backward(torch.nn.functional.mse_loss(model(x), y))
                        opt.step()
                        opt.zero_grad()
                    acc.wait_for_everyone()
                    assert os.path.exists(os.path.join(folder, "accel_manifest.json"))
                    assert not os.path.exists(folder + ".accel-tmp")
                return acc.unwrap_model(model)
    return acc.unwrap_model(model)


def check_resume() -> None:
    """2 processes: train 0->N equals train 0->k, save_state, fresh objects, load_state, k->N (bit for bit)."""
    folder = os.path.join(
        tempfile.gettempdir(), f"accel-resume-{os.environ['TORCHELASTIC_RUN_ID']}"
    )
    straight = _resume_run(folder, None, False)
    _resume_run(folder, 13, False)  # mid-epoch: 10 steps per epoch per process
    resumed = _resume_run(folder, None, True)
    for (name, p), q in zip(straight.named_parameters(), resumed.parameters()):
        assert torch.equal(p, q), f"resumed run differs at {name}"
    dist.barrier()
    if dist.get_rank() == 0:
        shutil.rmtree(folder)


def check_async_resume() -> None:
    """2 processes: resuming from ``save_state(..., async_save=True)`` equals training straight through."""
    folder = os.path.join(
        tempfile.gettempdir(), f"accel-async-resume-{os.environ['TORCHELASTIC_RUN_ID']}"
    )
    straight = _resume_run(folder, None, False)
    _resume_run(folder, 13, False, async_save=True)
    resumed = _resume_run(folder, None, True)
    for (name, p), q in zip(straight.named_parameters(), resumed.parameters()):
        assert torch.equal(p, q), f"run resumed from an async checkpoint differs at {name}"
    dist.barrier()
    if dist.get_rank() == 0:
        shutil.rmtree(folder)


CHECKS = {
    "parity": check_parity,
    "accumulation": check_accumulation_skips_allreduce,
    "comm_hooks": check_comm_hooks,
    "local_sgd": check_local_sgd,
    "join": check_join_uneven_inputs,
    "resume": check_resume,
    "async_resume": check_async_resume,
    "providers": check_missing_plugin_message,
}

if __name__ == "__main__":
    names = sys.argv[1:] or list(CHECKS)
    for name in names:
        CHECKS[name]()
        if dist.get_rank() == 0:
            print(f"ok {name}", flush=True)
