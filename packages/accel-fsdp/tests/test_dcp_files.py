"""accel.checkpoint.dcp_files: the raw-bytes DCP writer and its reader, in one process (no_dist)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed.checkpoint as dcp
from accel.checkpoint.dcp_files import RAW, RawReader, RawWriter
from accel_fsdp.merge import load_dcp_state_dict


def _state() -> dict:
    g = torch.Generator().manual_seed(0)
    return {
        "model": {
            "w": torch.randn(8, 6, generator=g),
            "b": torch.randn(6, generator=g).to(torch.bfloat16),
            "step": torch.tensor(7.0),
            "empty": torch.empty(0, 3),
        },
        "groups": [{"lr": 0.1, "name": "all"}],
    }


def _zeros_like(state: dict) -> dict:
    model = {k: torch.zeros_like(v) for k, v in state["model"].items()}
    return {"model": model, "groups": [{"lr": 0.0, "name": ""}]}


@pytest.mark.parametrize("writer", ["raw", "standard"])
def test_reader_reads_raw_and_standard_files(tmp_path, writer):
    state = _state()
    storage = RawWriter(tmp_path) if writer == "raw" else dcp.FileSystemWriter(tmp_path)
    dcp.save(state, storage_writer=storage, no_dist=True)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [".metadata", "__0_0.distcp"], files
    target = _zeros_like(state)
    dcp.load(target, storage_reader=RawReader(tmp_path), no_dist=True)
    for key, value in state["model"].items():
        assert target["model"][key].dtype == value.dtype
        assert torch.equal(target["model"][key], value), key
    assert target["groups"] == state["groups"]
    merged = load_dcp_state_dict(tmp_path)  # what merge_fsdp_weights reads: whole tensors
    assert torch.equal(merged["model"]["w"], state["model"]["w"])


def test_raw_files_hold_the_bytes_and_the_standard_reader_refuses_them(tmp_path):
    state = _state()
    dcp.save(state, storage_writer=RawWriter(tmp_path), no_dist=True)
    raw = (tmp_path / "__0_0.distcp").read_bytes()
    assert state["model"]["w"].numpy().tobytes() in raw  # not a torch.save zip record
    metadata = RawReader(tmp_path).read_metadata()
    marked = [i for i in metadata.storage_data.values() if RAW in (i.transform_descriptors or ())]
    assert len(marked) == 4  # the tensors (not the pickled non-tensor values)
    with pytest.raises(dcp.api.CheckpointException) as refused:
        dcp.load(_zeros_like(state), storage_reader=dcp.FileSystemReader(tmp_path), no_dist=True)
    assert "accel-raw" in repr(refused.value.failures)  # "Unknown extension name='accel-raw'"
