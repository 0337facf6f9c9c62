"""Full-precision weights from a ZeRO checkpoint (what DeepSpeed's ``zero_to_fp32.py`` does), in accel's layout.

``accelerator.save_state(folder)`` writes model ``i``'s DeepSpeed checkpoint under
the tag ``pytorch_model`` (``pytorch_model_i`` for ``i`` > 0); these functions
default to model 0 of such a folder. They run in one process, without the engine.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from accel.errors import CheckpointError

from .backend import checkpoint_tag

if TYPE_CHECKING:
    import torch

ModuleT = TypeVar("ModuleT", bound="torch.nn.Module")


def _tag(checkpoint_dir: Path, tag: str | None, index: int) -> str:
    if tag is not None:
        return tag
    default = checkpoint_tag(index)
    if (checkpoint_dir / default).is_dir():
        return default
    latest = checkpoint_dir / "latest"
    if latest.is_file():
        return latest.read_text().strip()
    raise CheckpointError(
        f"{checkpoint_dir} has no DeepSpeed checkpoint {default}/ and no 'latest' file: pass tag=..."
    )


def get_fp32_state_dict_from_zero_checkpoint(
    checkpoint_dir: str | os.PathLike, tag: str | None = None, index: int = 0
) -> dict[str, torch.Tensor]:
    """The fp32 state dict of model ``index`` from a ZeRO (stage 1-3) checkpoint folder."""
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint as convert

    folder = Path(checkpoint_dir)
    return convert(str(folder), tag=_tag(folder, tag, index))


def load_state_dict_from_zero_checkpoint(
    model: ModuleT, checkpoint_dir: str | os.PathLike, tag: str | None = None, index: int = 0
) -> ModuleT:
    """Load the fp32 weights of a ZeRO checkpoint into ``model`` (moved to the CPU); returns it."""
    state_dict = get_fp32_state_dict_from_zero_checkpoint(checkpoint_dir, tag, index)
    model = model.cpu()
    model.load_state_dict(state_dict, strict=False)
    return model


def convert_zero_checkpoint_to_fp32_state_dict(
    checkpoint_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    tag: str | None = None,
    index: int = 0,
    safe_serialization: bool = True,
    max_shard_size: int | str = "10GB",
) -> list[str]:
    """Write the fp32 weights of a ZeRO checkpoint to ``output_dir`` (safetensors shards); returns the files."""
    from accel.checkpoint.weights import save_weights

    state_dict = get_fp32_state_dict_from_zero_checkpoint(checkpoint_dir, tag, index)
    return save_weights(
        {k: v.contiguous() for k, v in state_dict.items()},
        output_dir,
        max_shard_size=max_shard_size,
        safe_serialization=safe_serialization,
    )
