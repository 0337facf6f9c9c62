"""``accel.utils.save`` with safetensors: tensors that share memory are written once, and said so."""

from __future__ import annotations

import logging

import torch


def test_save_logs_the_shared_tensors_it_leaves_out(tmp_path, caplog):
    from accel.utils import save
    from safetensors.torch import load_file

    weight = torch.randn(4, 3)
    state = {"embed.weight": weight, "lm_head.weight": weight, "bias": torch.zeros(3)}
    path = tmp_path / "model.safetensors"
    with caplog.at_level(logging.INFO):
        save(state, path, safe_serialization=True)
    assert sorted(load_file(path)) == ["bias", "embed.weight"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, caplog.text
    assert "lm_head.weight" in warnings[0].getMessage()
    assert "embed.weight" in warnings[0].getMessage()  # the name it shares memory with


def test_save_without_shared_tensors_logs_nothing(tmp_path, caplog):
    from accel.utils import save

    with caplog.at_level(logging.INFO):
        save(
            {"a": torch.ones(2), "b": torch.ones(2)},
            tmp_path / "m.safetensors",
            safe_serialization=True,
        )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_accelerator_save_writes_shared_tensors_once(tmp_path, caplog):
    from accel import Accelerator
    from safetensors.torch import load_file

    weight = torch.randn(4, 3)
    path = tmp_path / "model.safetensors"
    with caplog.at_level(logging.INFO):
        Accelerator(cpu=True).save({"a": weight, "b": weight}, path, safe_serialization=True)
    assert sorted(load_file(path)) == ["a"]
    assert "b (shares memory with a)" in caplog.text
