"""accel.checkpoint.torch_files: checkpoint torch.save files without zip CRC-32s, loading as before."""

from __future__ import annotations

import threading
import zipfile

import pytest
import torch
from accel import Accelerator
from accel.checkpoint.torch_files import save_without_crc, without_zip_crc
from accel.state import AcceleratorState, GradientState
from torch import nn

config = pytest.importorskip("torch.utils.serialization").config
if not hasattr(config.save, "compute_crc32"):
    pytest.skip(
        "this torch always writes zip CRCs (no compute_crc32 setting)", allow_module_level=True
    )


def _checks_out(path) -> bool:
    """Whether every zip record's CRC-32 matches its data (what ``unzip -t`` checks)."""
    with zipfile.ZipFile(path) as archive:
        return archive.testzip() is None


def test_save_without_crc_loads_the_same_and_restores_the_setting(tmp_path):
    tensor = torch.randn(1000)
    save_without_crc({"t": tensor}, tmp_path / "plain.pt")
    torch.save({"t": tensor}, tmp_path / "default.pt")
    assert not _checks_out(tmp_path / "plain.pt")  # the records carry no checksum
    assert _checks_out(tmp_path / "default.pt")  # torch's default afterwards
    assert config.save.compute_crc32 is True
    loaded = torch.load(tmp_path / "plain.pt", weights_only=True)
    assert torch.equal(loaded["t"], tensor)


def test_the_writer_thread_skips_the_crc_and_the_main_thread_keeps_it(tmp_path):
    """What an asynchronous save does: the block runs in a background thread."""

    def write() -> None:
        save_without_crc({"t": torch.ones(100)}, tmp_path / "thread.pt")

    thread = threading.Thread(target=write)
    thread.start()
    thread.join(30)
    torch.save({"t": torch.ones(100)}, tmp_path / "main.pt")
    assert not _checks_out(tmp_path / "thread.pt")
    assert _checks_out(tmp_path / "main.pt")
    assert config.save.compute_crc32 is True


def test_a_previous_setting_is_restored():
    config.save.compute_crc32 = False
    try:
        with without_zip_crc():
            pass
        assert config.save.compute_crc32 is False
    finally:
        config.save.compute_crc32 = True


def test_save_state_writes_optimizer_files_without_crc_and_resumes(tmp_path):
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = nn.Linear(8, 4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.backward(model(torch.randn(2, 8)).sum())
    optimizer.step()
    accelerator.save_state(tmp_path / "ckpt")
    accelerator.save({"w": model.weight.detach()}, tmp_path / "saved.pt", safe_serialization=False)
    assert not _checks_out(tmp_path / "ckpt" / "optimizer.bin")
    assert _checks_out(tmp_path / "saved.pt")  # accelerator.save keeps torch's default
    expected = {k: v.clone() for k, v in optimizer.state_dict()["state"][0].items()}
    optimizer.zero_grad()
    accelerator.backward(model(torch.randn(2, 8)).sum())
    optimizer.step()
    accelerator.load_state(tmp_path / "ckpt")
    for name, value in optimizer.state_dict()["state"][0].items():
        assert torch.equal(value, expected[name]), name
