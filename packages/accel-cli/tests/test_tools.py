"""`accel estimate-memory` (offline, configs shipped here) and `accel merge-weights`."""

from __future__ import annotations

import json

import pytest

BERT_BASE_CASED = {
    "architectures": ["BertForMaskedLM"],
    "hidden_size": 768,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "model_type": "bert",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "type_vocab_size": 2,
    "vocab_size": 28996,
}
GPT2 = {
    "model_type": "gpt2",
    "n_embd": 768,
    "n_layer": 12,
    "n_positions": 1024,
    "vocab_size": 50257,
}
TINY_LLAMA = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 3,
    "vocab_size": 1000,
}


@pytest.mark.usefixtures("without_transformers")
def test_estimate_memory_matches_the_seed_table_for_bert(accel, tmp_path):
    model = tmp_path / "bert-base-cased"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(BERT_BASE_CASED))
    out = accel("estimate-memory", str(model), timeout=120)
    assert out.returncode == 0, out.stderr
    rows = {line.split("|")[1].strip(): line for line in out.stdout.splitlines() if "|" in line}
    # the seed: float32 84.95 MB / 413.18 MB / 1.61 GB; float16 42.47 MB / 206.59 MB / 826.36 MB
    assert all(v in rows["float32"] for v in ("84.95 MB", "413.18 MB", "1.61 GB"))
    assert all(v in rows["float16"] for v in ("42.47 MB", "206.59 MB", "826.36 MB"))
    assert all(v in rows["int8"] for v in ("21.24 MB", "103.29 MB", "413.18 MB"))
    assert all(v in rows["int4"] for v in ("10.62 MB", "51.65 MB", "206.59 MB"))


@pytest.mark.parametrize(
    ("config", "params"),
    [
        (BERT_BASE_CASED, 108_310_272),  # BertModel (bert-base-cased)
        (GPT2, 124_439_808),  # GPT2Model (gpt2)
        # embed + 3 x (q, k, v, o, gate, up, down, 2 norms) + norm
        (
            TINY_LLAMA,
            1000 * 64 + 3 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64,
        ),
        ({**TINY_LLAMA, "model_type": "qwen2"}, 175_040 + 3 * (64 + 2 * 32)),  # q/k/v biases
    ],
)
def test_builtin_builders_count_parameters_on_meta(config, params):
    from accel_cli.estimate import _builtin_model, model_sizes

    model = _builtin_model(dict(config), "config.json")
    assert all(p.device.type == "meta" for p in model.parameters())
    assert sum(p.numel() for p in model.parameters()) == params
    largest, total = model_sizes(model)
    assert total >= params * 4 and largest < total


def test_estimate_memory_json(accel, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY_LLAMA))
    out = accel(
        "estimate-memory", str(path), "--dtypes", "float32", "bfloat16", "--json", timeout=120
    )
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert [r["dtype"] for r in rows] == ["float32", "bfloat16"]
    # the same with transformers or accel's builder: 175,040 parameters + 16 rotary buffer values
    assert rows[0]["total_size"] == 175_056 * 4 and rows[1]["total_size"] == 175_056 * 2
    assert rows[0]["training_using_adam"] == 175_056 * 16


def test_merge_weights_dcp_to_safetensors(accel, tmp_path):
    import torch
    import torch.distributed.checkpoint as dcp
    from safetensors.torch import load_file

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    ckpt = tmp_path / "pytorch_model_fsdp_0"
    with pytest.warns(UserWarning):  # no process group: DCP saves as one process
        dcp.save({"model": model.state_dict()}, checkpoint_id=str(ckpt))
    target = tmp_path / "merged" / "model.safetensors"
    out = accel("merge-weights", str(ckpt), str(target), "--remove_checkpoint_dir", timeout=120)
    assert out.returncode == 0, out.stderr
    assert not ckpt.exists()
    merged = load_file(target)
    expected = model.state_dict()
    assert sorted(merged) == sorted(expected)
    assert all(torch.equal(merged[k], expected[k]) for k in expected)
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    fresh.load_state_dict(merged)
    x = torch.randn(5, 4)
    assert torch.equal(fresh(x), model(x))
