"""What every conformance check trains: a tiny model, fixed data, and the plain-PyTorch reference.

The worker processes and the test process import this module, so both build exactly the same
model and data. Nothing here imports pytest.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import torch

if TYPE_CHECKING:
    from accel.accelerator import Accelerator

IN_FEATURES = 4
"""Inputs per sample of the conformance data."""
HIDDEN = 8
"""Hidden width of :func:`make_model`."""
LEARNING_RATE = 0.1
"""SGD learning rate of every conformance run."""
MOMENTUM = 0.9
"""SGD momentum: the optimizer has state, so a resume that loses it is caught."""


def load_object(spec: str) -> object:
    """Import ``"package.module:name"`` or ``"/path/to/file.py:name"`` and return the attribute.

    The file form lets a test module point the worker processes at a function defined in itself.
    """
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise ValueError(f"expected 'module:name' or '/path/file.py:name', got {spec!r}")
    if where.endswith(".py"):
        path = Path(where)
        module_name = f"accel_conformance_{path.stem}_{abs(hash(str(path)))}"
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(loader_spec)
        loader_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    obj: object = module
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


class TrainRun(TypedDict, total=False):
    """What a conformance run records (rank 0's file), and the reference's ``losses`` / ``weights``."""

    backend: str
    world_size: int
    losses: list[float]
    """The mean loss of each optimizer step."""
    weights: dict[str, torch.Tensor]
    """The final weights (float32, CPU)."""
    initial_weights: dict[str, torch.Tensor]
    weights_at_save: dict[str, torch.Tensor]
    weights_before_load: dict[str, torch.Tensor]
    weights_after_load: dict[str, torch.Tensor]


def make_model(seed: int = 0) -> torch.nn.Module:
    """``Linear(4, 8) -> Tanh -> Linear(8, 1)`` with weights drawn from ``seed``."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(IN_FEATURES, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, 1)
    )


def make_dataset(num_samples: int, seed: int = 1234) -> torch.utils.data.TensorDataset:
    """``num_samples`` inputs and a smooth target, the same in every process."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_samples, IN_FEATURES, generator=generator)
    y = torch.sin(x.sum(dim=1, keepdim=True)) + 0.1 * x[:, :1]
    return torch.utils.data.TensorDataset(x, y)


def make_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    """SGD with momentum over ``model``'s parameters."""
    return torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)


def default_train_step(
    accelerator: Accelerator,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: Sequence[torch.Tensor],
) -> torch.Tensor:
    """One accelerated step: forward, MSE loss, ``accelerator.backward``, step, zero_grad.

    A plugin whose prepared model behaves differently (it runs forward and backward itself)
    passes its own step with the same signature; it returns this process's mean loss.
    """
    x, y = batch
    loss = torch.nn.functional.mse_loss(model(x), y)
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    return loss.detach()


def train_reference(
    steps: int,
    global_batch_size: int,
    model_factory: Callable[[int], torch.nn.Module] = make_model,
    seed: int = 0,
) -> TrainRun:
    """Train in plain PyTorch, one process, full global batches: ``{"losses", "weights"}``."""
    model = model_factory(seed)
    optimizer = make_optimizer(model)
    loader = torch.utils.data.DataLoader(
        make_dataset(steps * global_batch_size), batch_size=global_batch_size
    )
    losses = []
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
    return {"losses": losses, "weights": state_of(model)}


def state_of(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached float32 CPU copy of ``model.state_dict()``."""
    return {k: v.detach().float().cpu().clone() for k, v in model.state_dict().items()}


def differences(
    got: dict[str, torch.Tensor],
    want: dict[str, torch.Tensor],
    atol: float,
    rtol: float,
) -> list[str]:
    """Describe every way two state dicts differ beyond ``atol + rtol * |want|`` (empty: they match)."""
    problems = []
    if set(got) != set(want):
        problems.append(f"keys differ: got {sorted(got)}, want {sorted(want)}")
    for key in sorted(set(got) & set(want)):
        a, b = got[key].float(), want[key].float()
        if a.shape != b.shape:
            problems.append(f"{key}: shape {tuple(a.shape)} != {tuple(b.shape)}")
        elif not torch.allclose(a, b, atol=atol, rtol=rtol):
            problems.append(f"{key}: max difference {float((a - b).abs().max()):.3g}")
    return problems


def losses_match(got: list[float], want: list[float], atol: float, rtol: float) -> bool:
    """Whether two loss curves have the same length and agree step by step."""
    return len(got) == len(want) and all(
        math.isclose(a, b, abs_tol=atol, rel_tol=rtol) for a, b in zip(got, want)
    )
