"""Prepared data loaders on XLA: each batch fetched ends the previous traced step.

torch_xla's ``MpDeviceLoader`` iterates the loader in a background thread; accel keeps
the iteration in the training thread instead, so the end-of-epoch and remainder flags
that gradient accumulation and ``gather_for_metrics`` read stay exact. The prepared
:class:`~accel.data_loader.DataLoaderShard` already sends each batch to the XLA device
(the copy is asynchronous); this module only adds the step boundary and, under SPMD,
the batch sharding.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

import torch
from torch.utils.data import DataLoader

from . import runtime

BatchT = TypeVar("BatchT")
LoaderT = TypeVar("LoaderT", bound=DataLoader)


class SpmdMesh(Protocol):
    """What is read of a ``torch_xla.distributed.spmd.Mesh``: its axis sizes by name."""

    def shape(self) -> Mapping[str, int]:
        """``{axis name: number of devices}``."""
        ...


if TYPE_CHECKING:

    class _XLALoader(DataLoader):
        """A prepared loader that :func:`to_xla_loader` turned into its XLA variant."""

        _xla_mesh: SpmdMesh | None


def shard_batch(batch: BatchT, mesh: SpmdMesh) -> BatchT:
    """Annotate every tensor of ``batch`` as split along its first dimension over the mesh's ``data`` axis.

    Tensors whose first dimension does not divide evenly stay replicated.
    """
    import torch_xla.distributed.spmd as xs
    from accel.distributed.operations import recursively_apply

    devices = mesh.shape()["data"]

    def mark(t: torch.Tensor) -> torch.Tensor:
        if t.ndim >= 1 and t.shape[0] % devices == 0:
            xs.mark_sharding(t, mesh, ("data",) + (None,) * (t.ndim - 1))
        return t

    # `mark` returns each leaf itself: the batch keeps its type.
    return cast("BatchT", recursively_apply(mark, batch))


@functools.cache
def _xla_class(base: type[DataLoader]) -> type[DataLoader]:
    """A subclass of the prepared loader's class whose iteration marks XLA steps."""

    def __iter__(self: _XLALoader) -> Iterator[object]:
        for index, batch in enumerate(base.__iter__(self)):
            if index:
                runtime.sync()  # the previous batch's step is complete: run its graph
            if self._xla_mesh is not None:
                batch = shard_batch(batch, self._xla_mesh)
            yield batch

    return type(
        f"XLA{base.__name__}",
        (base,),
        {
            "__iter__": __iter__,
            "__doc__": f"A {base.__name__} on an XLA device: one traced step per batch.",
            "__module__": __name__,
        },
    )


def to_xla_loader(loader: LoaderT, mesh: SpmdMesh | None = None) -> LoaderT:
    """Turn a prepared loader into its XLA variant in place (same state, positions and flags).

    ``mesh``: an SPMD mesh with a ``data`` axis to shard batches over, or None.
    """
    loader.__class__ = cast("type[LoaderT]", _xla_class(type(loader)))  # a subclass of it
    loader._xla_mesh = mesh
    return loader
