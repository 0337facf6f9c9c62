"""``accel merge-weights``: a sharded (torch.distributed.checkpoint) checkpoint into one file.

Reads the checkpoint the way ``torch.distributed.checkpoint.format_utils.dcp_to_torch_save``
does (no process group needed; a progress bar over its files on a terminal), then writes the flattened state dict as one
safetensors file.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from .parsing import Parser, UsageError

if TYPE_CHECKING:
    import torch


def main(argv: list[str], prog: str = "accel merge-weights") -> int:
    """Merge ``checkpoint_directory`` into ``output_path``."""
    parser = Parser(
        prog=prog,
        description="Merge a sharded checkpoint written with torch.distributed.checkpoint "
        "(FSDP's SHARDED_STATE_DICT, e.g. pytorch_model_fsdp_0/) into one safetensors file.",
    )
    parser.add_argument("checkpoint_directory", help="folder holding .metadata and *.distcp files")
    parser.add_argument(
        "output_path",
        help="a folder (model.safetensors is written inside) or a file name ending in .safetensors",
    )
    parser.add_argument(
        "--unsafe_serialization",
        action="store_true",
        help="write pytorch_model.bin with torch.save instead of safetensors",
    )
    parser.add_argument(
        "--remove_checkpoint_dir",
        action="store_true",
        help="delete the sharded checkpoint after a successful merge",
    )
    args = parser.parse_args(argv)
    written, count = merge_weights(
        args.checkpoint_directory,
        args.output_path,
        safe_serialization=not args.unsafe_serialization,
        remove_checkpoint_dir=args.remove_checkpoint_dir,
    )
    print(f"Merged {count} tensors into {written}")
    return 0


def merge_weights(
    checkpoint_dir: str | Path,
    output_path: str | Path,
    safe_serialization: bool = True,
    remove_checkpoint_dir: bool = False,
) -> tuple[Path, int]:
    """Merge the DCP checkpoint in ``checkpoint_dir``; ``(file written, number of tensors)``."""
    source = Path(checkpoint_dir)
    if not source.is_dir():
        raise UsageError(f"checkpoint directory {str(source)!r} does not exist")
    if not (source / ".metadata").is_file():
        inner = sorted(p.parent for p in source.glob("*/.metadata"))
        hint = f"; did you mean {inner[0]}?" if inner else ""
        raise UsageError(
            f"{source} is not a torch.distributed.checkpoint folder (no .metadata file){hint}"
        )
    out = Path(output_path)
    if out.suffix in (".safetensors", ".bin"):
        target = out
    else:
        target = out / ("model.safetensors" if safe_serialization else "pytorch_model.bin")
    if target.suffix == ".safetensors" and not safe_serialization:
        raise UsageError("--unsafe_serialization writes a .bin file: give a folder or a .bin name")
    target.parent.mkdir(parents=True, exist_ok=True)

    import torch

    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".merge-") as tmp:
        state = _read_dcp(source, Path(tmp))
        tensors = _flatten(state)
        if not tensors:
            raise UsageError(f"{source} holds no tensors to merge")
        if safe_serialization:
            from safetensors.torch import save_file

            save_file(
                {k: v.contiguous() for k, v in tensors.items()},
                str(target),
                metadata={"format": "pt"},
            )
        else:
            torch.save(tensors, target)
    if remove_checkpoint_dir:
        shutil.rmtree(source)
    return target, len(tensors)


def _read_dcp(source: Path, scratch: Path) -> object:
    """The whole state dict of the DCP checkpoint ``source``, read file by file with a
    progress bar (on a terminal); through a torch.save file in ``scratch`` where this torch's
    DCP lacks the pieces."""
    import torch

    try:
        from accel.checkpoint.dcp_files import RawReader
        from torch.distributed.checkpoint.format_utils import _EmptyStateDictLoadPlanner
        from torch.distributed.checkpoint.state_dict_loader import _load_state_dict
    except ImportError:
        from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

        full = scratch / "full.pt"
        dcp_to_torch_save(str(source), str(full))
        return torch.load(full, map_location="cpu", weights_only=True, mmap=True)

    from accel.progress import progress_bar

    class Reader(RawReader):
        """accel's DCP reader (raw and standard files) advancing a bar per file it opens."""

        def read_data(self, plan, planner):  # noqa: ANN001, ANN201 (torch's signature)
            files = sorted({self.storage_data[i.storage_index].relative_path for i in plan.items})
            steps = iter(progress_bar(files, "Merging shards", unit="file"))
            opened = self.fs.create_stream

            def create_stream(path, mode):  # noqa: ANN001, ANN202
                next(steps, None)
                return opened(path, mode)

            self.fs.create_stream = create_stream
            try:
                return super().read_data(plan, planner)
            finally:
                for _ in steps:  # the bar ends at its total
                    pass
                del self.fs.create_stream

    state: dict[str, object] = {}
    # what dcp_to_torch_save does, with the reader above and no torch.save copy on disk
    _load_state_dict(
        state,
        storage_reader=Reader(str(source)),
        planner=_EmptyStateDictLoadPlanner(),
        no_dist=True,
    )
    return state


def _flatten(state: object) -> dict[str, torch.Tensor]:
    """Tensors of a nested state dict by dotted name; a lone ``model`` entry is unwrapped."""
    import torch

    if isinstance(state, dict) and set(state) == {"model"} and isinstance(state["model"], dict):
        state = state["model"]
    out: dict[str, torch.Tensor] = {}

    def walk(prefix: str, value: object) -> None:
        if isinstance(value, torch.Tensor):
            out[prefix] = value
        elif isinstance(value, dict):
            for key, sub in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), sub)

    walk("", state)
    return out
