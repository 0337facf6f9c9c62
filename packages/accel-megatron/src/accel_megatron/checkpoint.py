"""Model and optimizer checkpoints through megatron-core's distributed checkpointing.

Inside an accel checkpoint folder, ``model_0/`` and ``optimizer_0/`` are megatron-core
``dist_checkpointing`` directories (``torch_dist`` format: ``*.distcp`` shards,
``.metadata``, ``common.pt``, ``metadata.json``). Every process writes its shard and
reads what its own shard needs, so a checkpoint loads under other tensor or pipeline
degrees (megatron-core reshards it).

accel saves synchronously. megatron-core's writer collects its results in a queue that it
would otherwise create through a ``spawn``-context ``multiprocessing.Manager`` (a new
interpreter that re-imports the training script); an in-process queue is used instead.
"""

from __future__ import annotations

import queue
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch.distributed as dist
from accel.errors import CheckpointError

from .cpu import cpu_execution

if TYPE_CHECKING:
    import torch
    from megatron.core.optimizer import MegatronOptimizer
    from megatron.core.transformer.module import MegatronModule


def _megatron(model: torch.nn.Module) -> MegatronModule:
    """``model`` as the megatron-core module it is (the backend prepares no other kind)."""
    return cast("MegatronModule", model)


def _synchronous_writes() -> None:
    from megatron.core.dist_checkpointing.strategies import filesystem_async

    if filesystem_async._results_queue is None:
        filesystem_async._results_queue = queue.Queue()


def _prepare_folder(path: Path) -> None:
    if not dist.is_initialized() or dist.get_rank() == 0:
        path.mkdir(parents=True, exist_ok=True)
    if dist.is_initialized():
        dist.barrier()


def _check_exists(path: Path) -> None:
    if not (path / "metadata.json").exists():
        raise CheckpointError(
            f"{path} is not a megatron-core distributed checkpoint (no metadata.json): "
            "was it saved by accel-megatron's save_state?"
        )


def save_model(model: torch.nn.Module, path: Path, on_cpu: bool) -> None:
    """Write ``model``'s shards (its ``sharded_state_dict``) into the directory ``path``; every rank calls."""
    from megatron.core import dist_checkpointing

    _synchronous_writes()
    _prepare_folder(path)
    with cpu_execution(on_cpu):
        dist_checkpointing.save(_megatron(model).sharded_state_dict(), str(path))


def load_model(model: torch.nn.Module, path: Path, on_cpu: bool, strict: bool = True) -> None:
    """Fill ``model`` from the distributed checkpoint ``path`` (resharded to this run's degrees)."""
    from megatron.core import dist_checkpointing

    _check_exists(path)
    with cpu_execution(on_cpu):
        state = dist_checkpointing.load(_megatron(model).sharded_state_dict(), str(path))
        # without a strict flag, load returns the state dict alone
        model.load_state_dict(cast("Mapping[str, object]", state), strict=strict)


def save_optimizer(
    optimizer: MegatronOptimizer, model: torch.nn.Module, path: Path, on_cpu: bool
) -> None:
    """Write the megatron-core ``optimizer``'s states, sharded like ``model``'s parameters."""
    from megatron.core import dist_checkpointing

    _synchronous_writes()
    _prepare_folder(path)
    with cpu_execution(on_cpu):
        state = optimizer.sharded_state_dict(_megatron(model).sharded_state_dict())
        dist_checkpointing.save(state, str(path))


def load_optimizer(
    optimizer: MegatronOptimizer, model: torch.nn.Module, path: Path, on_cpu: bool
) -> None:
    """Restore the megatron-core ``optimizer`` from the distributed checkpoint ``path``."""
    from megatron.core import dist_checkpointing

    _check_exists(path)
    with cpu_execution(on_cpu):
        template = optimizer.sharded_state_dict(
            _megatron(model).sharded_state_dict(), is_loading=True
        )
        optimizer.load_state_dict(dist_checkpointing.load(template, str(path)))
