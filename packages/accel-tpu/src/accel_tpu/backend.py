"""The XLA backend: ``distributed_type: XLA`` (``TPU`` is the same), through torch_xla.

Each replica drives one XLA device (``xla:N``); the process state learns its ordinals
from the PJRT runtime. Gradients are all-reduced through ``torch_xla.core.xla_model``
just before the optimizer steps (or before clipping), and every optimizer step and every
batch fetched from a prepared data loader ends the traced step (``torch_xla.sync()``),
so the same graph is compiled once and replayed. Under SPMD (``xr.use_spmd()`` called
before the Accelerator), one process drives every device and batches are sharded along
their first dimension over a ``data`` mesh axis.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import torch
from accel.backends.base import Backend
from accel.distributed.operations import recursively_apply
from accel.optimizer import AcceleratedOptimizer
from accel.types import DistributedType

from . import runtime
from .data import SpmdMesh, to_xla_loader
from .settings import check_precision

if TYPE_CHECKING:
    from accel.precision import Precision

T = TypeVar("T")

logger = logging.getLogger(__name__)


def reduce_gradients(optimizer: torch.optim.Optimizer) -> None:
    """Average the gradients of ``optimizer`` over the replicas (nothing to do with one)."""
    if runtime.world_size() > 1:
        import torch_xla.core.xla_model as xm

        xm.reduce_gradients(optimizer)


class XLAOptimizer(AcceleratedOptimizer):
    """An :class:`~accel.optimizer.AcceleratedOptimizer` that averages gradients over the
    replicas before stepping, then ends the traced step."""

    def step(self, closure: Any = None) -> Any:  # as AcceleratedOptimizer.step (torch overloads it)
        """All-reduce the gradients (unless clipping already did), step, then ``torch_xla.sync()``."""
        if not self.gradient_state.sync_gradients:
            return None
        if not self.gradient_state.is_xla_gradients_synced:
            reduce_gradients(self.optimizer)
        self.gradient_state.is_xla_gradients_synced = False
        result = super().step(closure)
        runtime.sync()
        return result


def tied_parameter_groups(model: torch.nn.Module) -> list[list[str]]:
    """Names of parameters shared between several places of ``model`` (tied weights), grouped."""
    names: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
    return [group for group in names.values() if len(group) > 1]


def broken_ties(model: torch.nn.Module, groups: list[list[str]]) -> list[list[str]]:
    """The groups of ``groups`` whose parameters are no longer one object in ``model``."""
    params = dict(model.named_parameters(remove_duplicate=False))
    return [g for g in groups if len({id(params[n]) for n in g if n in params}) > 1]


class XLABackend(Backend):
    """Training on XLA devices (TPU, or PJRT's CPU devices for testing) through torch_xla."""

    name = "xla"
    distributed_types = ("XLA", "TPU")
    mesh: SpmdMesh | None = None
    """Under SPMD, the ``(data, model)`` mesh batches are sharded over; None otherwise."""

    # -- lifecycle ----------------------------------------------------------
    def setup(self) -> Precision:
        """Check the precision, take the device and the replica ordinals from PJRT; returns the
        precision remade for the XLA device."""
        run = self.context
        check_precision(run.precision)
        run.set_process_layout(
            runtime.device(),
            num_processes=runtime.world_size(),
            process_index=runtime.global_ordinal(),
            local_process_index=runtime.local_ordinal(),
            distributed_type=DistributedType.XLA,
            backend="xla",
        )
        self.mesh = _data_mesh() if runtime.is_spmd() else None
        # the precision was made for the device seen before this backend: autocast on "xla" now
        return type(run.precision)(run.precision.name, run.device, run.handlers)

    # -- prepare --------------------------------------------------------------
    def prepare(self, objects: list[object], device_placement: list[bool]) -> list[object]:
        """Prepare everything, then point the optimizers at the moved parameters.

        Moving a module to an XLA device makes new ``Parameter`` objects, so optimizers
        built on the CPU model would step tensors nobody uses. The run's precision is checked
        again here: one set after set-up (``accelerator.precision = ...``) must run on XLA too.
        """
        check_precision(self.context.precision)
        before = {  # the old parameters are kept alive here, so their ids stay unique
            id(param): (param, (index, name))
            for index, obj in enumerate(objects)
            if isinstance(obj, torch.nn.Module)
            for name, param in obj.named_parameters()
        }
        result = super().prepare(objects, device_placement)
        after = {
            (index, name): param
            for index, obj in enumerate(result)
            if isinstance(obj, torch.nn.Module)
            for name, param in self.unwrap_model(obj).named_parameters()
        }
        moved = {key: after[place] for key, (_, place) in before.items() if place in after}
        for obj, placed in zip(result, device_placement):
            if isinstance(obj, torch.optim.Optimizer):
                switch_parameters(getattr(obj, "optimizer", obj), moved)
                if placed:
                    _check_on_xla(getattr(obj, "optimizer", obj))
        return result

    def prepare_model(
        self, model: torch.nn.Module, device_placement: bool = True, evaluation_mode: bool = False
    ) -> torch.nn.Module:
        """Move the model to the XLA device, keeping tied weights tied (see :func:`broken_ties`)."""
        groups = tied_parameter_groups(model)
        prepared = super().prepare_model(model, device_placement, evaluation_mode)
        inner = self.unwrap_model(prepared)
        broken = broken_ties(inner, groups)
        tie_weights = getattr(inner, "tie_weights", None)
        if broken and callable(tie_weights):
            tie_weights()
            broken = broken_ties(inner, groups)
        if broken:
            logger.warning(
                "tied weights %s were untied by moving the model to the XLA device: call "
                "model.tie_weights() after accelerator.prepare(model) when "
                "accelerator.distributed_type == DistributedType.XLA",
                ", ".join("=".join(g) for g in broken),
            )
        return prepared

    def prepare_optimizer(
        self, optimizer: torch.optim.Optimizer, device_placement: bool = True
    ) -> XLAOptimizer:
        """Wrap the optimizer in :class:`XLAOptimizer`."""
        return XLAOptimizer(
            optimizer, precision=self.context.precision, device_placement=device_placement
        )

    def prepare_data_loader(
        self, dataloader: torch.utils.data.DataLoader, device_placement: bool = True
    ) -> torch.utils.data.DataLoader:
        """Shard the loader over the replicas; batches go to the XLA device, one step each."""
        run = self.context
        config = run.dataloader_config
        restore = config.data_seed
        if config.data_seed is None and run.num_processes > 1:
            # every replica must shuffle alike; torch.distributed is not set up on XLA
            drawn = torch.randint(0, 2**31 - 1, (1,), device=run.device)
            config.data_seed = int(self.reduce(drawn * int(run.is_main_process), "sum").item())
        try:
            loader = super().prepare_data_loader(dataloader, device_placement)
        finally:
            config.data_seed = restore
        return to_xla_loader(loader, self.mesh)

    # -- training step --------------------------------------------------------
    def clip_grad_norm_(
        self, parameters: Iterable[torch.Tensor], max_norm: float, norm_type: float = 2.0
    ) -> torch.Tensor | None:
        """Average gradients over the replicas first (once per step), then clip."""
        self._reduce_gradients_now()
        return super().clip_grad_norm_(parameters, max_norm, norm_type)

    def clip_grad_value_(self, parameters: Iterable[torch.Tensor], clip_value: float) -> None:
        """Average gradients over the replicas first (once per step), then clip."""
        self._reduce_gradients_now()
        super().clip_grad_value_(parameters, clip_value)

    def _reduce_gradients_now(self) -> None:
        state = self.context.gradient_state
        if runtime.world_size() == 1 or state.is_xla_gradients_synced:
            return
        for optimizer in self.context.prepared.optimizers:
            reduce_gradients(getattr(optimizer, "optimizer", optimizer))
        state.is_xla_gradients_synced = True

    # -- collectives ----------------------------------------------------------
    def gather(self, tensor: T) -> T:
        """Concatenate ``tensor`` (nested) from every replica with ``xm.all_gather``."""
        if runtime.world_size() == 1:
            return tensor
        import torch_xla.core.xla_model as xm

        # all_gather maps each tensor leaf to a tensor: the structure is still a T.
        gathered = recursively_apply(
            lambda t: xm.all_gather(t[None] if t.ndim == 0 else t, dim=0),
            tensor,
            error_on_other_type=True,
        )
        return cast("T", gathered)

    def reduce(self, tensor: T, reduction: str = "sum", scale: float = 1.0) -> T:
        """All-reduce ``tensor`` (nested) over the replicas with ``xm.all_reduce``."""
        if reduction not in ("sum", "mean", "none"):
            raise ValueError(f"reduce(reduction={reduction!r}): use 'sum', 'mean' or 'none'")
        world = runtime.world_size()

        def one(t: torch.Tensor) -> torch.Tensor:
            out = t.clone()
            if world > 1 and reduction != "none":
                import torch_xla.core.xla_model as xm

                out = xm.all_reduce(xm.REDUCE_SUM, out)
            if reduction == "mean":
                out = out / world if out.is_floating_point() else out // world
            return out * scale if scale != 1.0 else out

        # `one` maps each tensor leaf to a tensor: the structure is still a T.
        return cast("T", recursively_apply(one, tensor, error_on_other_type=True))

    def wait_for_everyone(self) -> None:
        """Barrier over the replicas (``xm.rendezvous``); with one, only the pending step runs."""
        runtime.sync()
        if runtime.world_size() > 1:
            import torch_xla.core.xla_model as xm

            xm.rendezvous("accel.wait_for_everyone")

    # -- state dicts and checkpoints ---------------------------------------------
    def get_state_dict(
        self, model: torch.nn.Module, unwrap: bool = True
    ) -> dict[str, torch.Tensor]:
        """The model's state dict, copied to the CPU (XLA tensors cannot be serialised)."""
        return runtime.to_cpu(super().get_state_dict(model, unwrap=unwrap))

    def save_optimizer_state(
        self,
        optimizer: torch.optim.Optimizer,
        folder: Path,
        index: int,
        model: torch.nn.Module | None = None,
    ) -> None:
        """Write the optimizer state from the main replica with ``xm.save`` (CPU copies)."""
        import torch_xla.core.xla_model as xm
        from accel.checkpoint.layout import optimizer_file

        path = optimizer_file(folder, index)
        tmp = path.with_name(path.name + ".tmp")
        xm.save(optimizer.state_dict(), tmp, master_only=True, global_master=True)
        if self.context.is_main_process:
            tmp.replace(path)


def switch_parameters(optimizer: torch.optim.Optimizer, moved: Mapping[int, torch.Tensor]) -> None:
    """Replace the parameters of ``optimizer`` (and the keys of its state) by their moved copies.

    ``moved`` maps ``id(old parameter)`` to the new one.
    """
    for group in optimizer.param_groups:
        group["params"] = [moved.get(id(p), p) for p in group["params"]]
    if optimizer.state:
        state: defaultdict[torch.Tensor, dict] = defaultdict(dict)
        state.update({moved.get(id(k), k): v for k, v in optimizer.state.items()})
        optimizer.state = state


def _check_on_xla(optimizer: torch.optim.Optimizer) -> None:
    stray = [
        p for group in optimizer.param_groups for p in group["params"] if p.device.type != "xla"
    ]
    if stray:
        raise ValueError(
            f"{len(stray)} parameter(s) of the optimizer are not on the XLA device: pass the model "
            "and its optimizer to the same accelerator.prepare() call, or create the optimizer "
            "from the prepared model"
        )


def _data_mesh() -> SpmdMesh:
    """A ``(data, model)`` SPMD mesh putting every device on the data axis."""
    import numpy as np
    import torch_xla.distributed.spmd as xs

    count = runtime.global_device_count()
    return xs.Mesh(np.arange(count), (count, 1), ("data", "model"))
