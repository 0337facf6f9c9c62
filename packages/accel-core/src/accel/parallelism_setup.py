"""What a :class:`~accel.parallelism_config.ParallelismConfig` means for this run.

:func:`resolve_layout` takes the config given to the Accelerator (or the one ``accel launch``
asked for), the run's distributed type, process count and device type, and returns what the
``AcceleratorState`` records: the config, the distributed type (a layout that shards or
splits parameters on a plain one-process or data-parallel run selects ``FSDP``: accel-fsdp
applies N-D parallelism) and the device mesh. The state applies it; nothing here changes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from accel.catalog import DATA_PARALLEL_TYPES
from accel.parallelism_config import ParallelismConfig, needs_nd_backend
from accel.types import DistributedType

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh


class Layout(NamedTuple):
    """The N-D layout of a run, as the ``AcceleratorState`` records it."""

    parallelism_config: ParallelismConfig | None
    distributed_type: DistributedType | str
    device_mesh: DeviceMesh | None


def resolve_layout(
    config: ParallelismConfig | None,
    distributed_type: DistributedType | str,
    num_processes: int,
    device_type: str,
) -> Layout:
    """The layout for ``config`` (None: the one ``accel launch`` asked for, if any).

    The sizes are checked against ``num_processes``; the mesh is built on ``device_type``
    when there are several processes.
    """
    if config is None:
        config = ParallelismConfig.from_environment()
    if config is None:
        return Layout(None, distributed_type, None)
    dtype = str(getattr(distributed_type, "value", distributed_type))
    if needs_nd_backend(config) and (dtype == "NO" or dtype in DATA_PARALLEL_TYPES):
        distributed_type, dtype = DistributedType.FSDP, "FSDP"
    config.validate_world(num_processes, dtype)
    mesh = config.get_device_mesh(device_type) if num_processes > 1 else None
    return Layout(config, distributed_type, mesh)


__all__ = ["Layout", "resolve_layout"]
