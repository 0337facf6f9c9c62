"""The accel-ft backend: fault-tolerant data parallelism across replica groups on torchft.

``accel launch --ft`` sets ``ACCEL_BACKEND=ft`` for every worker, so an unchanged script's
``Accelerator()`` selects this backend. It owns one :class:`~accel_ft.session.ReplicaSession`
(torchft's Manager) and prepares:

- models in torchft's ``DistributedDataParallel`` (gradients averaged over the groups of the
  step's quorum, a member dying mid-way failing the step rather than the survivors); with
  several processes per group, DDP over the group first, then across;
- optimizers through torchft's ``OptimizerWrapper``: a step commits only when the quorum
  agrees, and a step that did not commit is skipped (the scheduler does not advance either);
- data loaders as :class:`~accel_ft.data.QuorumDataLoader`: each step's share of the global
  sample order.
"""

from __future__ import annotations

import atexit
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch
from accel.backends import Backend
from accel.optimizer import AcceleratedOptimizer

from . import runstate
from .config import FT_SECTION
from .session import ReplicaSession

if TYPE_CHECKING:
    from accel.scheduler import AcceleratedScheduler
    from torchft.manager import Manager

    from .data import QuorumDataLoader


class FTBackend(Backend):
    """Replica groups that keep training when one fails (``ACCEL_BACKEND=ft``)."""

    name = "ft"
    distributed_types = ()

    session: ReplicaSession
    """This process's link to the quorum (set by :meth:`setup`)."""
    _gated: dict[int, FTOptimizer]
    """id of each optimizer given to ``prepare`` -> its FTOptimizer (its schedulers step with it)."""

    def setup(self) -> None:
        """Join the lighthouse (as ``accel launch --ft`` configured) and check the options."""
        settings = FT_SECTION.read()
        ctx = self.context
        if ctx.gradient_accumulation_steps != 1:
            raise ValueError(
                "accel-ft commits one optimizer step per batch across the replica groups: "
                "use gradient_accumulation_steps=1 (raise the batch size instead)"
            )
        self.session = ReplicaSession(
            settings,
            group_rank=ctx.process_index,
            group_size=ctx.num_processes,
            capture=lambda: runstate.capture(self),
            restore=lambda state: runstate.restore(self, state),
        )
        atexit.register(self.session.shutdown)
        self._gated = {}
        return None

    # -- prepare ------------------------------------------------------------------
    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """torchft's DDP across the groups (within a group of several processes: DDP first)."""
        if not any(p.requires_grad for p in model.parameters()):
            return model
        manager = self.session.manager
        if self.context.num_processes == 1:
            return _replica_ddp(model, manager)
        return _two_level_ddp(model, manager, self.context.num_processes)

    def prepare_optimizer(
        self, optimizer: torch.optim.Optimizer, device_placement: bool = True
    ) -> FTOptimizer:
        """The optimizer behind torchft's ``OptimizerWrapper``, stepping only on commit."""
        gated = FTOptimizer(
            _commit_gated(self.session, optimizer),
            precision=self.context.precision,
            device_placement=device_placement,
        )
        self._gated[id(optimizer)] = gated
        return gated

    def prepare_scheduler(
        self, scheduler: object, optimizers: list[torch.optim.Optimizer]
    ) -> AcceleratedScheduler:
        """The scheduler, stepping with the :class:`FTOptimizer` of its optimizer.

        Core finds a scheduler's prepared optimizer by the torch optimizer it wraps; here
        that is torchft's wrapper, so without this the schedule would follow the raw
        optimizer and advance on steps that did not commit (one step early per failure).
        """
        gated: list[torch.optim.Optimizer] = [self._gated.get(id(o), o) for o in optimizers]
        return super().prepare_scheduler(scheduler, gated)

    def data_parallel_shard(self) -> tuple[int, int]:
        """Within the replica group: its processes and this one's rank (the groups come on top)."""
        return self.context.num_processes, self.context.process_index

    def prepare_data_loader(
        self, dataloader: torch.utils.data.DataLoader, device_placement: bool = True
    ) -> QuorumDataLoader:
        """A :class:`~accel_ft.data.QuorumDataLoader` over the loader's dataset."""
        from .data import QuorumDataLoader

        ctx = self.context
        seed = ctx.dataloader_config.data_seed
        return QuorumDataLoader(
            dataloader,
            self.session,
            group_rank=ctx.process_index,
            group_size=ctx.num_processes,
            device=ctx.device if device_placement else None,
            seed=0 if seed is None else int(seed),
            gradient_state=ctx.gradient_state,
        )

    def tracker_values(self) -> dict[str, object]:
        """``ft/quorum_size`` (replica groups of the latest step) with every ``accelerator.log``."""
        return {"ft/quorum_size": self.session.quorum_size}


class CommitGated(Protocol):
    """What :func:`_commit_gated` wraps an optimizer in: its inner optimizer and the last verdict."""

    optim: torch.optim.Optimizer
    committed: bool


class FTOptimizer(AcceleratedOptimizer):
    """accel's optimizer wrapper over torchft's: a step that did not commit counts as skipped."""

    def step(self, closure: Any = None) -> Any:  # Any: as the AcceleratedOptimizer.step it extends
        """Step when the quorum commits; otherwise mark the step skipped (schedulers wait)."""
        result = super().step(closure)
        if self.gradient_state.sync_gradients:
            self._is_overflow = not cast(CommitGated, self.optimizer).committed
        return result

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero the gradients (the quorum of the next step starts with its first batch)."""
        if self.gradient_state.sync_gradients:
            cast(CommitGated, self.optimizer).optim.zero_grad(set_to_none=set_to_none)


def _commit_gated(
    session: ReplicaSession, optimizer: torch.optim.Optimizer
) -> torch.optim.Optimizer:
    """torchft's ``OptimizerWrapper`` whose ``step`` asks the session to commit the open step."""
    from torchft.optim import OptimizerWrapper

    class CommitGatedOptimizer(OptimizerWrapper):
        committed = False

        def zero_grad(self, set_to_none: bool = True) -> None:
            self.optim.zero_grad(set_to_none)

        def step(self, closure: object | None = None) -> None:
            if closure is not None:
                raise ValueError("accel-ft: optimizers stepped with a closure are not supported")
            self.committed = session.commit()
            if self.committed:
                self.optim.step()

    return CommitGatedOptimizer(session.manager, optimizer)


def _averaged(manager: Manager, buffer: torch.Tensor) -> torch.futures.Future[torch.Tensor]:
    """``buffer`` averaged over the quorum, as a completed future.

    A member that dies during the all-reduce makes the wait fail: torchft records the error
    (the step will not commit) and the buffer's content no longer matters.
    """
    if not manager.allreduce(buffer).wait():
        buffer.zero_()
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result(buffer)
    return future


def _replica_ddp(model: torch.nn.Module, manager: Manager) -> torch.nn.Module:
    """torchft's DDP, whose gradient hook survives a member dying during the all-reduce.

    torchft 0.2.0's own hook asserts on the failed work's future and so crashes the
    survivors; this one lets the step fail instead (it does not commit, and is retried).
    """
    from torchft.ddp import DistributedDataParallel

    class ReplicaDDP(DistributedDataParallel):
        @staticmethod
        def _comm_hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP checks annotations
            return _averaged(state, bucket.buffer())

    return ReplicaDDP(manager, model)


def _two_level_ddp(model: torch.nn.Module, manager: Manager, group_size: int) -> torch.nn.Module:
    """DDP over the group's processes whose gradient buckets are then averaged across groups."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    def hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP checks annotations
        buffer = bucket.buffer()
        dist.all_reduce(buffer)
        buffer.div_(group_size)
        return _averaged(manager, buffer)

    # buckets fixed from the start: a healed group's must match its peers'
    wrapped = DistributedDataParallel(model, find_unused_parameters=True)
    wrapped.register_comm_hook(None, hook)
    return wrapped


__all__ = ["FTBackend", "FTOptimizer"]
