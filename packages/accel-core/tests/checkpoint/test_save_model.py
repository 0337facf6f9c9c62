"""save_model / save: safetensors by default, sharding with an index, tied weights."""

from __future__ import annotations

import json

import pytest
import torch
from accel import Accelerator
from accel.testing.models import TinyLM, tiny_lm
from accel.utils.modeling import load_weights, parse_size
from safetensors.torch import load_file
from torch import nn


def _deep_model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Linear(16, 16) for _ in range(4)])


def _tied() -> TinyLM:
    return tiny_lm(width=4, depth=1, vocab=10)


def _assert_same(state: dict, expected: dict) -> None:
    assert state.keys() == expected.keys()
    for key, value in expected.items():
        assert torch.equal(state[key], value), key


def test_save_model_writes_safetensors_by_default(tmp_path):
    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(_deep_model())
    accelerator.save_model(model, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["model.safetensors"]
    _assert_same(load_file(tmp_path / "out" / "model.safetensors"), model.state_dict())


def test_save_model_without_safe_serialization_writes_a_torch_file(tmp_path):
    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(_deep_model())
    accelerator.save_model(model, tmp_path / "out", safe_serialization=False)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["pytorch_model.bin"]
    _assert_same(load_weights(tmp_path / "out"), model.state_dict())


def test_save_model_shards_with_an_index(tmp_path):
    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(_deep_model())
    out = tmp_path / "out"
    accelerator.save_model(model, out, max_shard_size="1KB")

    index = json.loads((out / "model.safetensors.index.json").read_text())
    shards = sorted(p.name for p in out.glob("*.safetensors"))
    assert len(shards) > 1
    assert not (out / "model.safetensors").exists()
    assert sorted(set(index["weight_map"].values())) == shards
    state = model.state_dict()
    assert index["weight_map"].keys() == state.keys()
    assert index["metadata"]["total_size"] == sum(
        t.numel() * t.element_size() for t in state.values()
    )
    for shard in shards:
        tensors = load_file(out / shard)
        # each key lives in the shard the index names
        assert {k for k, v in index["weight_map"].items() if v == shard} == tensors.keys()
        size = sum(t.numel() * t.element_size() for t in tensors.values())
        assert (
            size <= 1000 or len(tensors) == 1
        )  # a tensor larger than the limit gets its own shard

    _assert_same(load_weights(out), state)


def test_save_model_refuses_a_file_path(tmp_path):
    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(_deep_model())
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="directory"):
        accelerator.save_model(model, tmp_path / "file")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1KB", 1000), ("1KiB", 1024), ("10GB", 10 * 10**9), ("500MB", 500 * 10**6), (123, 123)],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("max_shard_size", ["10GB", "100B"])
def test_tied_weights_survive_save_model(tmp_path, max_shard_size):
    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(_tied())
    accelerator.save_model(model, tmp_path / "out", max_shard_size=max_shard_size)
    loaded = load_weights(tmp_path / "out")
    _assert_same(loaded, model.state_dict())

    fresh = TinyLM(width=4, depth=1, vocab=10)
    fresh.load_state_dict(loaded)  # strict: both names present
    assert fresh.head.weight is fresh.embed.weight
    ids = torch.tensor([[1, 2, 3]])
    assert torch.equal(fresh(ids), model(ids))


def test_tied_weights_survive_save_state_and_stay_tied(tmp_path):
    accelerator = Accelerator(cpu=True)
    model = _tied()
    model, optimizer = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    accelerator.save_state(tmp_path / "ckpt")

    with torch.no_grad():
        model.embed.weight.fill_(0.0)
        model.blocks[0].fc1.weight.fill_(0.0)
    accelerator.load_state(tmp_path / "ckpt")
    _assert_same(model.state_dict(), expected)
    assert model.head.weight is model.embed.weight

    # still tied in training: one update moves both names
    accelerator.backward(model(torch.tensor([[1, 2]])).sum())
    optimizer.step()
    assert torch.equal(model.head.weight, model.embed.weight)
    assert not torch.equal(model.embed.weight, expected["embed.weight"])


def test_accelerator_save_writes_atomically(tmp_path):
    accelerator = Accelerator(cpu=True)
    accelerator.save({"a": torch.arange(3), "meta": [1, 2]}, tmp_path / "obj.pt")
    loaded = torch.load(tmp_path / "obj.pt", weights_only=True)
    assert torch.equal(loaded["a"], torch.arange(3)) and loaded["meta"] == [1, 2]
    accelerator.save({"w": torch.ones(2)}, tmp_path / "w.safetensors", safe_serialization=True)
    assert torch.equal(load_file(tmp_path / "w.safetensors")["w"], torch.ones(2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["obj.pt", "w.safetensors"]
