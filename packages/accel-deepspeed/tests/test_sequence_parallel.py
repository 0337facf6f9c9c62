"""DeepSpeed sequence parallelism (``ParallelismConfig(sp_size=2)``): validation, slicing, 2 real processes.

The process tests start ``sp_worker.py`` through ``accel launch`` on DeepSpeed's CPU
accelerator (gloo); DeepSpeed JIT-builds its CPU ops with a C++ compiler, kept in
``$TORCH_EXTENSIONS_DIR`` as in test_conformance.py.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from accel.errors import ConfigError
from accel.parallelism_config import ParallelismConfig
from accel.testing.processes import accel_executable, run_processes
from accel_deepspeed.sequence_parallel import (
    SequenceParallelLayout,
    SequenceSlicingCollate,
    check_layout,
    slice_batch,
)

REPO = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("sp_worker.py")
CONFIG = """\
compute_environment: LOCAL_MACHINE
distributed_type: DEEPSPEED
deepspeed_config:
  zero_stage: 2
  gradient_clipping: 1000.0
  offload_optimizer_device: none
  offload_param_device: none
  zero3_init_flag: false
mixed_precision: 'no'
num_machines: 1
num_processes: 2
use_cpu: true
"""
ENV = {
    "DS_ACCELERATOR": "cpu",
    "TORCH_EXTENSIONS_DIR": os.environ.get(
        "TORCH_EXTENSIONS_DIR", str(REPO / ".cache" / "torch_extensions")
    ),
}
needs_compiler = pytest.mark.skipif(
    shutil.which(os.environ.get("CXX", "c++")) is None,
    reason="DeepSpeed JIT-builds its CPU ops (shm_comm) with a C++ compiler: apt-get install g++",
)
needs_accel = pytest.mark.skipif(
    accel_executable() is None, reason="needs accel-cli (accel launch)"
)


# -- validation ------------------------------------------------------------------------
def test_layout_of_each_rank():
    layouts = [SequenceParallelLayout(2, 4, rank) for rank in range(4)]
    assert [(x.sp_rank, x.dp_rank, x.dp_size) for x in layouts] == [
        (0, 0, 2),
        (1, 0, 2),
        (0, 1, 2),
        (1, 1, 2),
    ]
    assert layouts[3].group_ranks == [2, 3]


@pytest.mark.parametrize(
    ("kwargs", "world", "ds_config", "message"),
    [
        ({"sp_size": 3}, 4, {}, r"sp_size=3 must divide the number of processes \(4\)"),
        ({"sp_size": 4}, 2, {}, r"sp_size=4 must divide"),
        ({"sp_size": 2, "tp_size": 2}, 4, {}, "does not combine with tp_size=2"),
        ({"sp_size": 2, "dp_shard_size": 4}, 4, {}, r"data-parallel size is 4 / 2 = 2"),
        ({"sp_size": 2}, 4, {"tensor_parallel": {"autotp_size": 2}}, "AutoTP"),
        ({"sp_size": 2}, 4, {"sequence_parallel_size": 4}, "sequence_parallel_size=4"),
    ],
)
def test_bad_layouts_are_refused(kwargs, world, ds_config, message):
    with pytest.raises(ConfigError, match=message):
        check_layout(ParallelismConfig(**kwargs), world, 0, ds_config)


def test_good_layouts_pass():
    assert check_layout(ParallelismConfig(sp_size=2), 4, 3, {}).dp_rank == 1
    assert check_layout(ParallelismConfig(sp_size=2, dp_shard_size=2), 4, 0, {}).dp_size == 2


# -- slicing ---------------------------------------------------------------------------------
def test_each_rank_gets_its_slice_with_labels_shifted_before_cutting():
    ids = torch.arange(16).reshape(2, 8)
    batch = {"input_ids": ids, "labels": ids.clone(), "note": "kept"}
    parts = [slice_batch(batch, rank, 2) for rank in range(2)]
    assert parts[0]["input_ids"].tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]
    assert parts[1]["input_ids"].tolist() == [[4, 5, 6, 7], [12, 13, 14, 15]]
    # the last token of slice 0 is scored against the first token of slice 1
    assert parts[0]["shift_labels"].tolist() == [[1, 2, 3, 4], [9, 10, 11, 12]]
    assert parts[1]["shift_labels"].tolist() == [[5, 6, 7, -100], [13, 14, 15, -100]]
    assert parts[1]["position_ids"].tolist() == [[4, 5, 6, 7], [4, 5, 6, 7]]
    assert parts[1]["note"] == "kept"


def test_slicing_refuses_what_it_cannot_cut():
    with pytest.raises(ValueError, match="length 7 must be divisible by sp_size=2"):
        slice_batch({"input_ids": torch.zeros(1, 7, dtype=torch.long)}, 0, 2)
    with pytest.raises(ValueError, match="is not sp_seq_length=16"):
        slice_batch({"input_ids": torch.zeros(1, 8, dtype=torch.long)}, 0, 2, seq_length=16)
    with pytest.raises(ValueError, match=r"batch\['mask'\] has shape \(1, 1, 8, 8\)"):
        slice_batch({"input_ids": torch.zeros(1, 8), "mask": torch.zeros(1, 1, 8, 8)}, 0, 2)
    collate = SequenceSlicingCollate(lambda samples: torch.stack(samples), 0, 2)
    with pytest.raises(TypeError, match="needs dict batches"):
        collate([torch.zeros(8)])


# -- 2 real processes ---------------------------------------------------------------------------
def _launch(tmp_path: Path, mode: str, out: Path) -> None:
    config = tmp_path / "ds.yaml"
    config.write_text(CONFIG)
    run_processes(WORKER, [mode, str(out)], nproc=2, env=ENV, timeout=500, config_file=config)


@needs_compiler
@needs_accel
def test_groups_and_slices_on_two_processes(tmp_path):
    out = tmp_path / "layout"
    _launch(tmp_path, "layout", out)
    records = [json.loads(Path(f"{out}.{rank}.json").read_text()) for rank in range(2)]
    for rank, record in enumerate(records):
        assert record["sp_rank"] == rank
        assert record["group_ranks"] == [0, 1]
        assert record["data_parallel_shard"] == [1, 0]  # both ranks read every batch
        assert record["engine_sp_size"] == 2 and record["engine_seq_dp_world_size"] == 2
        assert record["train_batch_size"] == 2  # micro 2 x 1 step x dp 1
        assert len(record["batches"]) == 3
    for index, (zero, one) in enumerate(zip(records[0]["batches"], records[1]["batches"])):
        full = [z + o for z, o in zip(zero["input_ids"], one["input_ids"])]
        first = 100 * 2 * index
        assert full == [list(range(first, first + 16)), list(range(first + 100, first + 116))]
        assert len(zero["input_ids"][0]) == 8


@needs_compiler
@needs_accel
def test_two_rank_ulysses_training_matches_one_process(tmp_path):
    pytest.importorskip("transformers", reason="needs transformers: uv sync --group test")
    out = tmp_path / "train.json"
    _launch(tmp_path, "train", out)
    result = json.loads(out.read_text())
    (got_losses, got_state), (want_losses, want_state) = result["got"], result["want"]
    assert result["slice_lengths"] == [8, 8, 8]
    assert got_losses == pytest.approx(want_losses, rel=1e-5, abs=1e-6)
    assert want_losses[0] != pytest.approx(want_losses[-1])  # the weights moved
    assert set(got_state) == set(want_state)
    for name, want in want_state.items():
        got = torch.tensor(got_state[name])
        torch.testing.assert_close(got, torch.tensor(want), rtol=1e-4, atol=1e-5, msg=name)


def _tiny_model(name: str) -> torch.nn.Module:
    """A real transformers causal LM of two layers, built locally (no Hub)."""
    transformers = pytest.importorskip("transformers", reason="needs transformers")
    sizes = dict(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2)
    sizes.update(num_attention_heads=2, num_key_value_heads=2)
    config = getattr(transformers, f"{name}Config")(**sizes)
    torch.manual_seed(0)
    return getattr(transformers, f"{name}ForCausalLM")(config)


@pytest.mark.parametrize(
    ("name", "kind"), [("Qwen3Next", "linear_attention"), ("FalconH1", "hybrid")]
)
def test_models_with_recurrent_layers_are_refused_before_ulysses_is_set_up(name, kind):
    from types import SimpleNamespace

    from accel_deepspeed import sequence_parallel

    model = _tiny_model(name)
    handler = SimpleNamespace(sp_attn_implementation=None)
    with pytest.raises(ConfigError, match=f"cannot train {name}ForCausalLM.*'{kind}'.*sp_size=1"):
        sequence_parallel.register_attention(model, handler, sp_size=2, micro_batch_size=1)
    assert not sequence_parallel._registered  # refused before transformers' registry changed


def test_attention_only_models_pass_the_recurrence_check():
    from accel_deepspeed.sequence_parallel import refuse_recurrent_layers

    refuse_recurrent_layers(_tiny_model("Llama"))
    refuse_recurrent_layers(torch.nn.Linear(2, 2))  # no config: nothing to refuse
