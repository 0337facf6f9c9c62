"""Backend conformance worker, run on every process by torchrun or ``accel launch``.

argv[1]: a JSON spec written by :class:`accel.testing.BackendConformance`:
``phase`` (``train``: train ``steps`` steps, save_state after ``save_at``; ``resume``: fresh
model, load_state, finish), ``world_size``, ``backend_name``, ``steps``, ``save_at``,
``global_batch_size``, ``checkpoint``, ``out`` (a file rank 0 writes with ``torch.save``),
``accelerator_kwargs``, and optional ``accelerator_kwargs_factory``, ``model_factory``,
``train_step`` (``"module:name"`` or ``"/file.py:name"``).

Asserts inside the worker (wrong backend, wrong world size, a backend holding the
Accelerator instead of reading its :class:`~accel.backends.BackendContext`, untouched
weights, lost data position); any failure exits non-zero.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import cast

import torch

from accel import Accelerator
from accel.backends import BackendContext
from accel.testing.reference import (
    default_train_step,
    load_object,
    make_dataset,
    make_model,
    make_optimizer,
)


def check_context_only(accelerator: Accelerator) -> None:
    """The backend reads the run through its context, the Accelerator's, and holds no Accelerator."""
    backend = accelerator.backend
    assert isinstance(backend.context, BackendContext), "a backend is built with a BackendContext"
    assert backend.context is accelerator.backend_context, "the backend has another context"
    held = [name for name, value in vars(backend).items() if isinstance(value, Accelerator)]
    assert not held, f"the backend holds the Accelerator in {held}: read backend.context instead"
    assert backend.context.precision is accelerator.precision, "the context's precision is stale"


def main() -> None:
    """Run one phase of the backend check described by the JSON spec in argv[1]."""
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    kwargs = dict(spec["accelerator_kwargs"])
    if spec.get("accelerator_kwargs_factory"):
        factory = cast(
            "Callable[[], dict[str, object]]", load_object(spec["accelerator_kwargs_factory"])
        )
        kwargs.update(factory())
    model_factory = (
        cast("Callable[[int], torch.nn.Module]", load_object(spec["model_factory"]))
        if spec.get("model_factory")
        else make_model
    )
    train_step = (
        cast("Callable[..., torch.Tensor | float]", load_object(spec["train_step"]))
        if spec.get("train_step")
        else default_train_step
    )
    accelerator = Accelerator(**kwargs)
    world_size = spec["world_size"]
    assert accelerator.num_processes == world_size, (accelerator.num_processes, world_size)
    assert accelerator.backend.name == spec["backend_name"], (
        f"selected backend {accelerator.backend.name!r}, expected {spec['backend_name']!r} "
        f"(distributed_type {accelerator.distributed_type})"
    )
    check_context_only(accelerator)
    steps, save_at, batch = spec["steps"], spec["save_at"], spec["global_batch_size"]
    assert batch % world_size == 0, "the global batch must split evenly across ranks"
    resume = spec["phase"] == "resume"
    # a resumed run starts from other weights: only load_state can make it match
    model = model_factory(1 if resume else 0)
    optimizer = make_optimizer(model)
    loader = torch.utils.data.DataLoader(
        make_dataset(steps * batch), batch_size=batch // world_size
    )
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    result: dict = {"backend": accelerator.backend.name, "world_size": world_size}
    losses: list[float] = []

    def record(loss: torch.Tensor | float) -> None:
        local = torch.as_tensor(loss, dtype=torch.float32, device=accelerator.device).reshape(1)
        losses.append(float(accelerator.gather(local).mean()))

    if resume:
        result["weights_before_load"] = state_of_prepared(accelerator, model)
        accelerator.load_state(spec["checkpoint"])
        result["weights_after_load"] = state_of_prepared(accelerator, model)
        for step_batch in loader:  # the loader resumes where the checkpoint left it
            record(train_step(accelerator, model, optimizer, step_batch))
        assert len(losses) == steps - save_at, (
            f"after load_state the data loader gave {len(losses)} batches, expected "
            f"{steps - save_at}: the data position was not restored"
        )
    else:
        result["initial_weights"] = state_of_prepared(accelerator, model)
        for index, step_batch in enumerate(loader):
            record(train_step(accelerator, model, optimizer, step_batch))
            if index + 1 == save_at:
                accelerator.save_state(spec["checkpoint"])
                result["weights_at_save"] = state_of_prepared(accelerator, model)
        assert len(losses) == steps, (len(losses), steps)
    result["losses"] = losses
    result["weights"] = state_of_prepared(accelerator, model)
    if accelerator.is_main_process:
        torch.save(result, spec["out"])
    accelerator.wait_for_everyone()
    accelerator.print(f"ok backend {spec['phase']} world_size={world_size}")


def state_of_prepared(accelerator: Accelerator, model: torch.nn.Module) -> dict:
    """The full (gathered) state dict of a prepared model, as float32 CPU tensors."""
    full = accelerator.get_state_dict(model)
    return {k: v.detach().float().cpu().clone() for k, v in (full or {}).items()}


if __name__ == "__main__":
    main()
