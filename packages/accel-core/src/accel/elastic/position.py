"""The checkpoint format of a prepared data loader's position: a place in the epoch's global order.

A position names how far the run is in the epoch's *global* sample order (the order of the
loader's sampler, or of an iterable dataset's stream), not in one process's share of it, so a
run saved on N processes resumes on M. It is a dict of plain values, written by
``DataLoaderShard.state_dict`` into ``dl_state_dict*.bin``; this format is public and versioned.

Version 2 (``"version": 2``):

========================= ================================================================
``epoch``                 the epoch the next iteration draws its order for
``samples_seen``          samples of the epoch's global order already consumed (padding
                          excluded); ``None`` where the loader's batches do not come from
                          torch's ``BatchSampler`` over a sampler of known length
``batches_seen``          batches of the global batch sampler already consumed (``None`` for
                          iterable datasets)
``batch_size``            samples per batch of that batch sampler (per process without
                          ``split_batches``; the global batch with it or when dispatching)
``num_processes``         how many processes shared the batches when the position was saved
``length``                how many samples the epoch's order was drawn over (the sampler's
                          length; absent for streams, and in positions written before it was recorded):
                          a mid-epoch position is refused by a loader of another length
``global_order``          False when each process read its own shards of the dataset (a
                          Hugging Face iterable dataset with a shard per process): the
                          position then holds only for the same number of processes
``batches_yielded``       this process's batches of the epoch (version 1's field: a resume on
                          the same layout continues from it exactly as before)
``seed``                  the seed of a ``SeedableRandomSampler`` (``use_seedable_sampler``)
``sampler``               what the epoch's order was drawn from: ``{"seed": int}`` or
                          ``{"generator": ByteTensor}`` (torch's default shuffling)
``first_batch``           (dispatcher) the epoch's first global batch, which pads its last one
``stateful_dataloader``   (``use_stateful_dataloader``) torchdata's own per-process state
========================= ================================================================

Version 1 (accel 0.1) has ``epoch``, ``batches_yielded``, ``seed`` and ``sampler`` only, per
process; :func:`upgrade` reads it with the world size from the checkpoint's manifest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    import torch

VERSION = 2
"""The version :func:`upgrade` brings a position to, and ``state_dict`` writes."""


class Drawn(TypedDict, total=False):
    """What an epoch's order was drawn from: ``{"seed": int}`` or ``{"generator": ByteTensor}``."""

    seed: int
    generator: torch.Tensor


class Position(TypedDict, total=False):
    """A data loader position, the fields of the table above."""

    version: int
    epoch: int
    samples_seen: int | None
    batches_seen: int | None
    batch_size: int | None
    num_processes: int | None
    length: int
    global_order: bool
    batches_yielded: int
    seed: int
    sampler: Drawn
    first_batch: object
    stateful_dataloader: dict[str, object]


def upgrade(state: Position, num_processes: int | None = None) -> Position:
    """``state`` in the current version; a version-1 position is counted on ``num_processes``.

    Version 1 did not record the batch size: it is read as the resuming loader's (the same
    script), which is what ``batch_size`` ``None`` means to the loader.
    """
    version = int(state.get("version", 1))
    if version > VERSION:
        raise ValueError(
            f"data loader position of version {version}: this accel reads up to version "
            f"{VERSION}; upgrade accel-core to resume this checkpoint"
        )
    if version == VERSION:
        return state
    upgraded = state.copy()
    upgraded.update(
        version=VERSION,
        num_processes=state.get("num_processes", num_processes),
        batch_size=None,
        samples_seen=None,
        batches_seen=None,
    )
    return upgraded


def describe(state: Position) -> str:
    """``epoch E, sample S`` (or ``batch K``): where a position stands, for the resume line."""
    where = f"epoch {state.get('epoch', 0)}"
    if state.get("samples_seen") is not None:
        return f"{where}, sample {state['samples_seen']}"
    if state.get("batches_seen") is not None:
        return f"{where}, batch {state['batches_seen']}"
    return f"{where}, batch {state.get('batches_yielded', 0)} of each process"


__all__ = ["VERSION", "Drawn", "Position", "describe", "upgrade"]
