"""The data loader of a replica group: each step's share of the epoch's global sample order.

Every group draws the same global order for an epoch (a permutation seeded by the data
seed and the epoch, or the sampler's own order), and every group holds the same position
in it, ``samples_seen``: the samples of the committed steps. Each step trains one global
batch of ``G = ft_batch_groups x P x b`` samples (``P`` processes per group, batch size
``b``), the ``G`` samples after ``samples_seen``, split evenly over the processes of the
groups in the step's quorum: with all groups present each process takes ``b``; with fewer,
each takes a larger share, so the sequence of global batches (and the loss curve) is the one
of a run without failures. The position moves only when the step commits, so the samples of
a step that did not commit (a group died during it) are the next step's, shared among the
groups left: each sample trains once per epoch. With ``ft_failed_step: skip`` the position
moves anyway and the step's sample ids are recorded in :attr:`QuorumDataLoader.skipped`
(torchft's own behaviour, made visible).

The last step of an epoch is completed with samples from the epoch's start (as accel's
``even_batches`` does), so that every process has a full batch; those are not counted.
The position is the ``version: 2`` format of :mod:`accel.elastic.position` (``epoch``,
``samples_seen``, ``seed``), independent of the number of groups.
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Any, cast

import torch
from accel.data.loader_state import DataLoaderStateMixin
from accel.distributed.operations import send_to_device
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler

from .session import ReplicaSession, StepPlan


def dataset_size(dataset: Any) -> int:
    """Samples of a map-style dataset (the only kind the quorum loader takes)."""
    return len(cast(Sized, dataset))


class QuorumDataLoader(DataLoaderStateMixin, DataLoader):
    """A map-style loader whose batches follow the quorum (see the module docstring).

    Built by the accel-ft backend from the loader given to ``prepare``: its dataset,
    ``batch_size``, ``collate_fn`` and sampler kind (shuffled or sequential) are kept.
    """

    def __init__(
        self,
        loader: DataLoader,
        session: ReplicaSession,
        group_rank: int,
        group_size: int,
        device: torch.device | None,
        seed: int,
        gradient_state: Any,
    ):
        if loader.batch_size is None or not hasattr(loader.dataset, "__getitem__"):
            raise ValueError(
                "accel-ft shares a map-style dataset's samples by index: give prepare() a "
                "DataLoader over a map-style dataset with a batch_size"
            )
        super().__init__(loader.dataset, batch_size=loader.batch_size, collate_fn=loader.collate_fn)
        self.source_sampler = loader.sampler
        self.session = session
        self.group_rank, self.group_size = group_rank, group_size
        self.device = device
        self.seed = int(seed)
        self.gradient_state = gradient_state  # the run's: end_of_dataloader, active loader
        self.epoch = 0
        """The epoch the position is in."""
        self.samples_seen = 0
        """Samples of the epoch's global order that committed steps trained."""
        self.skipped: list[int] = []
        """With ``ft_failed_step: skip``: ids of the samples of steps that did not commit."""
        self._iterations = 0  # iterations this process started (a healed one skips finished epochs)
        self._step_indices: list[int] | None = None  # the open step's global slice, if drawn here
        session.on_commit(self._step_closed)

    # -- order and position ------------------------------------------------------------
    def order(self, epoch: int) -> torch.Tensor:
        """The epoch's global sample order, the same in every replica group."""
        n = dataset_size(self.dataset)
        sampler = self.source_sampler
        if isinstance(sampler, RandomSampler) and not sampler.replacement:
            generator = torch.Generator()
            generator.manual_seed(self.seed + epoch)
            return torch.randperm(n, generator=generator)
        if isinstance(sampler, SequentialSampler):
            return torch.arange(n)
        set_epoch = getattr(sampler, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)
        return torch.tensor(list(iter(sampler)), dtype=torch.int64)

    def set_epoch(self, epoch: int) -> None:
        """Kept for scripts that call it: the epoch is the run's position, shared by all groups."""

    def state_dict(self) -> dict[str, Any]:
        """The world-size independent position (:mod:`accel.elastic.position`, version 2)."""
        return {
            "version": 2,
            "epoch": self.epoch,
            "samples_seen": self.samples_seen,
            "batches_seen": 0,
            "batch_size": self.batch_size,
            "num_processes": self.group_size,
            "seed": self.seed,
            "skipped": list(self.skipped),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a position (a peer's during a heal, or a checkpoint's)."""
        self.epoch = int(state.get("epoch", 0))
        self.samples_seen = int(state.get("samples_seen", 0))
        self.seed = int(state.get("seed", self.seed))
        self.skipped = list(state.get("skipped", []))

    # -- iteration -----------------------------------------------------------------------
    @property
    def global_batch(self) -> int:
        """Samples of one step over all groups: ``ft_batch_groups x P x batch_size``."""
        return self.session.batch_groups * self.group_size * int(self.batch_size or 1)

    def __len__(self) -> int:
        """Steps of an epoch."""
        return -(-dataset_size(self.dataset) // self.global_batch)

    # DataLoader.__iter__ is declared to return torch's private iterator class; this loader
    # yields its batches from a generator, as core's prepared loaders do
    def __iter__(self) -> Iterator[Any]:  # ty: ignore[incompatible-method-override]
        started = self._iterations
        self._iterations += 1
        if started < self.epoch:
            return  # a group healed into a later epoch: the run already trained this one
        epoch = self.epoch
        order = self.order(epoch)
        self.begin()
        try:
            while self.epoch == epoch and self.samples_seen < len(order):
                plan = self.session.begin_step()
                if self.epoch != epoch:
                    return  # healed into the next epoch: its iteration takes this open step
                indices, last = self._share(order, plan)
                self.end_of_dataloader = last
                batch = self.collate_fn([self.dataset[i] for i in indices])
                if self.device is not None:
                    batch = send_to_device(batch, self.device)
                yield batch
        finally:
            self.end()

    def _share(self, order: torch.Tensor, plan: StepPlan) -> tuple[list[int], bool]:
        """This process's indices of the step ``plan``, and whether it is the epoch's last."""
        total, step = len(order), self.global_batch
        start = self.samples_seen
        self._step_indices = order[start : min(total, start + step)].tolist()
        parts = plan.size * self.group_size
        part = plan.rank * self.group_size + self.group_rank
        low, high = part * step // parts, (part + 1) * step // parts
        positions = [(start + k) % total for k in range(low, high)]  # past the end: the start
        return [int(order[p]) for p in positions], start + step >= total

    def _step_closed(self, plan: StepPlan, committed: bool) -> None:
        """Advance the position by the step's samples when it committed (or when skipping)."""
        indices, self._step_indices = self._step_indices, None
        if indices is None:
            return  # the step drew no batch from this loader
        if not committed and self.session.failed_step != "skip":
            return  # retrained by the next step, shared among the groups left
        if not committed:
            self.skipped.extend(indices)
        total = dataset_size(self.dataset)
        self.samples_seen = min(total, self.samples_seen + len(indices))
        if self.samples_seen >= total:
            self.epoch += 1
            self.samples_seen = 0


__all__ = ["QuorumDataLoader"]
