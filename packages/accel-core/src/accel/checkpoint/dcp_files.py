"""Faster ``torch.distributed.checkpoint`` (DCP) files, for backends saving sharded states.

Imported only by a backend that saves with DCP (it imports ``torch.distributed.checkpoint``).

DCP's ``FileSystemWriter`` ``torch.save``\\ s every tensor as its own zip record (dozens
of small writes per tensor, a pickle each). :class:`RawWriter` keeps everything else of
DCP (the save planner, the global ``.metadata``, one ``__<rank>_0.distcp`` file per
process, ``fsync``) but writes each tensor's bytes as they are, one ``write`` per tensor,
and marks them in the metadata (the transform descriptor :data:`RAW`). :class:`RawReader`
reads those bytes straight into the destination tensor when the saved chunk maps onto it
(same sharding: one ``readinto``), or reads the chunk and copies the requested part
(resharding onto another number of processes); items written by the standard writer
(checkpoints of earlier accel versions) are read by ``FileSystemReader`` as before.

:func:`save` writes standard DCP files unless asked for raw ones. A raw checkpoint is still a DCP checkpoint (``dcp.load`` with :class:`RawReader`
reshards it, as do ``accel merge-weights`` and ``accel_fsdp.merge_fsdp_weights``); the
standard ``FileSystemReader`` (e.g. ``format_utils.dcp_to_torch_save``) refuses it, naming
the unknown transform ``accel-raw``.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.planner import LoadItemType, WriteItemType
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from accel.checkpoint.torch_files import without_zip_crc

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup
    from torch.distributed.checkpoint.metadata import (
        STATE_DICT_TYPE,
        Metadata,
        TensorStorageMetadata,
    )
    from torch.distributed.checkpoint.planner import (
        LoadPlan,
        LoadPlanner,
        ReadItem,
        SavePlan,
        SavePlanner,
    )

V = TypeVar("V")


class _Readable(Protocol):
    """The binary stream a raw chunk is read from (what ``fs.create_stream(path, "rb")`` opens)."""

    def seek(self, offset: int, whence: int = 0, /) -> int: ...
    def read(self, size: int = -1, /) -> bytes: ...
    def readinto(self, buffer: memoryview, /) -> int | None: ...


RAW = "accel-raw"
"""The transform descriptor of a tensor stored as its raw bytes (C order, native endianness)."""


def _bytes_of(tensor: torch.Tensor) -> memoryview:
    """The bytes of ``tensor`` (copied to the CPU and made contiguous only when needed)."""
    tensor = tensor.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.to("cpu")
    tensor = tensor.contiguous().reshape(-1)
    if tensor.numel() == 0:
        return memoryview(b"")
    return memoryview(tensor.view(torch.uint8).numpy())


def _done(value: V) -> Future[V]:
    future: Future[V] = Future()
    future.set_result(value)
    return future


class RawWriter(dcp.FileSystemWriter):
    """A ``FileSystemWriter`` that stores each process's tensors as raw bytes in one file."""

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[list[WriteResult]]:
        """Write every item of this process's ``plan`` into ``__<rank>_0.distcp``."""
        name = f"{plan.storage_data.prefix}0.distcp"
        results = []
        with open(os.path.join(self.path, name), "wb", buffering=0) as stream:
            offset = 0
            for item in plan.items:
                data = planner.resolve_data(item)
                if item.type == WriteItemType.BYTE_IO:
                    view, descriptors = cast(io.BytesIO, data).getbuffer(), None
                else:
                    view, descriptors = _bytes_of(cast(torch.Tensor, data)), [RAW]
                length = 0
                while length < view.nbytes:  # a large write may be short
                    length += stream.write(view[length:])
                info = _StorageInfo(name, offset, length, descriptors)
                results.append(
                    WriteResult(index=item.index, size_in_bytes=length, storage_data=info)
                )
                offset += length
            if self.sync_files:
                os.fsync(stream.fileno())
        return _done(results)


class RawReader(dcp.FileSystemReader):
    """Reads :class:`RawWriter` checkpoints (any sharding) and standard DCP ones."""

    def set_up_storage_reader(
        self, metadata: Metadata, is_coordinator: bool, *args: object, **kwargs: object
    ) -> None:
        """Keep the tensors' metadata (dtype, chunk shapes) for the raw items."""
        super().set_up_storage_reader(metadata, is_coordinator, *args, **kwargs)
        self.tensors = metadata.state_dict_metadata

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        """Read the raw items here, the others through ``FileSystemReader``."""
        raw: dict[str, list[ReadItem]] = {}
        others = []
        for item in plan.items:
            info = self.storage_data[item.storage_index]
            if item.type != LoadItemType.BYTE_IO and RAW in (info.transform_descriptors or ()):
                raw.setdefault(info.relative_path, []).append(item)
            else:
                others.append(item)
        if others:
            super().read_data(dataclasses.replace(plan, items=others), planner).wait()
        for relative_path, items in raw.items():
            items.sort(key=lambda item: self.storage_data[item.storage_index].offset)
            path = self.fs.concat_path(self.path, relative_path)
            with self.fs.create_stream(path, "rb") as stream:
                for item in items:
                    target = planner.resolve_tensor(item).detach()
                    self._read_item(cast("_Readable", stream), item, target)
                    planner.commit_tensor(item, target)
        return _done(None)

    def _chunk_sizes(self, item: ReadItem) -> tuple[torch.dtype, list[int]]:
        index = item.storage_index
        meta = cast("TensorStorageMetadata", self.tensors[index.fqn])  # a raw item is a tensor's
        chunks = meta.chunks
        offset = list(cast(torch.Size, index.offset))
        chunk = (
            chunks[index.index] if index.index is not None and index.index < len(chunks) else None
        )
        if chunk is None or list(chunk.offsets) != offset:
            chunk = next(c for c in chunks if list(c.offsets) == offset)
        return meta.properties.dtype, list(chunk.sizes)

    def _read_item(self, stream: _Readable, item: ReadItem, target: torch.Tensor) -> None:
        """Read the part ``item`` asks for of a raw chunk into ``target``."""
        info = self.storage_data[item.storage_index]
        dtype, sizes = self._chunk_sizes(item)
        starts, lengths = list(item.storage_offsets), list(item.lengths)
        # the part is one contiguous byte range when it spans every dimension but the first
        row = math.prod(sizes[1:]) * torch.empty(0, dtype=dtype).element_size()
        if sizes[1:] == lengths[1:] and not any(starts[1:]) and target.dtype == dtype:
            direct = target.is_contiguous() and target.device.type == "cpu"
            into = target if direct else torch.empty(target.shape, dtype=dtype)
            stream.seek(info.offset + (starts[0] * row if sizes else 0))
            view = _writable_bytes(into)
            got = 0
            while got < view.nbytes:
                count = stream.readinto(view[got:])
                if not count:
                    raise OSError(
                        f"{self.path}/{info.relative_path}: short read for {item.storage_index.fqn}"
                    )
                got += count
            if not direct:
                target.copy_(into)
            return
        stream.seek(info.offset)
        data = bytearray(stream.read(info.length))
        chunk = (
            torch.frombuffer(data, dtype=dtype).reshape(sizes)
            if data
            else torch.empty(sizes, dtype=dtype)
        )
        for dim, (start, length) in enumerate(zip(starts, lengths)):
            chunk = chunk.narrow(dim, start, length)
        target.copy_(chunk)


def _writable_bytes(tensor: torch.Tensor) -> memoryview:
    flat = tensor.reshape(-1)
    if flat.numel() == 0:
        return memoryview(bytearray())
    return memoryview(flat.view(torch.uint8).numpy())


def save(
    state_dict: STATE_DICT_TYPE,
    folder: str | os.PathLike,
    process_group: ProcessGroup | None = None,
    raw: bool = False,
) -> None:
    """``dcp.save`` of ``state_dict`` into ``folder``.

    ``raw=False`` (default): standard DCP files (``FileSystemWriter`` in this thread, its
    ``torch.save`` records without zip CRCs: :mod:`~accel.checkpoint.torch_files`), which any
    DCP reader opens (``dcp.load``, ``format_utils.dcp_to_torch_save``, Accelerate). A second
    writer thread cost more CPU than it saved on 2 cores, with 2 processes saving at once.
    ``raw=True``: :class:`RawWriter`'s files, faster to write and read, opened by
    :func:`load` (:class:`RawReader`) only.
    """
    writer = RawWriter(folder) if raw else dcp.FileSystemWriter(folder)
    with without_zip_crc():  # the standard files' torch.save records: torch.load never checks
        dcp.save(state_dict, storage_writer=writer, process_group=process_group)


def load(
    state_dict: STATE_DICT_TYPE, folder: str | os.PathLike, planner: LoadPlanner | None = None
) -> None:
    """``dcp.load`` of ``folder`` (raw or standard DCP files) into ``state_dict``, in place."""
    dcp.load(state_dict, storage_reader=RawReader(folder), planner=planner)
