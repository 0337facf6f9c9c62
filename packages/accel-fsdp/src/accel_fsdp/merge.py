"""``merge_fsdp_weights``: a sharded (DCP) checkpoint folder into one safetensors (or .bin) file."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.distributed.checkpoint.metadata import STATE_DICT_TYPE


def load_dcp_state_dict(checkpoint_dir: str | os.PathLike) -> STATE_DICT_TYPE:
    """Read a whole DCP checkpoint into memory without a process group."""
    from accel.checkpoint.dcp_files import RawReader
    from torch.distributed.checkpoint.format_utils import _EmptyStateDictLoadPlanner
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

    state_dict: STATE_DICT_TYPE = {}
    _load_state_dict(
        state_dict,
        storage_reader=RawReader(os.fspath(checkpoint_dir)),  # accel's raw files and standard ones
        planner=_EmptyStateDictLoadPlanner(),
        no_dist=True,
    )
    return state_dict


def merge_fsdp_weights(
    checkpoint_dir: str | os.PathLike,
    output_path: str | os.PathLike,
    safe_serialization: bool = True,
    remove_checkpoint_dir: bool = False,
) -> Path:
    """Merge the model shards in ``checkpoint_dir`` (``pytorch_model_fsdp_0/``) into ``output_path``.

    ``output_path`` is a directory; the file written is ``model.safetensors``
    (``pytorch_model.bin`` without ``safe_serialization``). Returns its path.
    """
    from accel.checkpoint.weights import save_weights

    source = Path(checkpoint_dir)
    if not (source / ".metadata").exists():
        nested = source / "pytorch_model_fsdp_0"
        if (nested / ".metadata").exists():
            source = nested
        else:
            raise FileNotFoundError(
                f"{checkpoint_dir} is not a DCP checkpoint (no .metadata): pass the pytorch_model_fsdp_0 folder"
            )
    state = load_dcp_state_dict(source)
    if set(state) == {"model"}:
        state = state["model"]
    out = Path(output_path)
    files = save_weights(state, out, max_shard_size="1000GB", safe_serialization=safe_serialization)
    if remove_checkpoint_dir:
        shutil.rmtree(source)
    return out / files[0]
