"""Building a named :class:`torch.distributed.DeviceMesh` from a layout's dimensions.

:meth:`accel.parallelism_config.ParallelismConfig.build_device_mesh` describes the mesh (the
enabled dimensions, their sizes, the flattened groups) and builds it here; torch is imported
only when a mesh is built, so the configuration stays torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh


def build_device_mesh(
    device_type: str,
    names: Sequence[str],
    shape: Sequence[int],
    flattened: Mapping[str, Sequence[str]],
) -> DeviceMesh:
    """A mesh of ``shape`` named ``names`` on ``device_type`` (``"cuda"``, ``"cpu"``, ...).

    Each ``flattened`` entry ``{name: parts}`` with parts adds the dimension ``name`` made of
    those dimensions flattened into one (``{"dp": ["dp_replicate", "dp_shard"]}``).
    """
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device_type, tuple(shape), mesh_dim_names=tuple(names))
    for flat, parts in flattened.items():
        if parts:
            mesh[tuple(parts)]._flatten(flat)
    return mesh


__all__ = ["build_device_mesh"]
