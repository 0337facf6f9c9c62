"""ParallelismConfig on one process: defaults, environment, validation, dimension names."""

from __future__ import annotations

import subprocess
import sys

import pytest
from accel.errors import ConfigError
from accel.parallelism_config import (
    DeepSpeedSequenceParallelConfig,
    ParallelismConfig,
    TorchContextParallelConfig,
    TorchTensorParallelConfig,
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    import os

    for name in list(os.environ):
        if name.startswith("PARALLELISM_CONFIG_") or name == "ACCEL_USE_PARALLELISM_CONFIG":
            monkeypatch.delenv(name)


def test_import_from_accel_is_cheap_and_torch_free():
    code = (
        "import sys; from accel import ParallelismConfig; import accel.utils as u; "
        "assert u.ParallelismConfig is ParallelismConfig; "
        "c = ParallelismConfig(dp_shard_size=2, tp_size=2); assert c.total_size == 4; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_defaults_are_one_and_nothing_is_enabled():
    config = ParallelismConfig()
    assert (config.dp_replicate_size, config.dp_shard_size, config.tp_size) == (1, 1, 1)
    assert (config.cp_size, config.sp_size) == (1, 1)
    assert (config.cp_backend, config.sp_backend) == ("torch", "deepspeed")
    assert config.total_size == 1 and config.active_mesh_dims == []
    assert config.tp_handler is None and config.cp_handler is None and config.sp_handler is None
    assert config.mesh_shape() == ((), ())
    assert config.build_device_mesh("cpu") is None  # nothing split: no mesh, no process group


def test_dimension_names_and_sizes_follow_accelerate():
    config = ParallelismConfig(dp_replicate_size=2, dp_shard_size=2, tp_size=2, cp_size=2)
    assert config.dp_dim_names == ["dp_replicate", "dp_shard"]
    assert config.non_dp_dim_names == ["tp", "cp"]
    assert config.dp_shard_cp_dim_names == ["dp_shard", "cp"]
    assert config.dp_cp_dim_names == ["dp_replicate", "dp_shard", "cp"]
    assert config.fsdp_dim_names == ["dp_replicate", "dp_shard_cp"]
    assert config.mesh_shape() == (("dp_replicate", "dp_shard", "cp", "tp"), (2, 2, 2, 2))
    assert config.total_size == 16
    assert config.data_parallel_size == 4 and config.non_data_parallel_size == 4
    assert isinstance(config.tp_handler, TorchTensorParallelConfig)
    assert config.cp_handler.cp_comm_strategy == "allgather"
    shard_only = ParallelismConfig(dp_shard_size=4)
    assert shard_only.fsdp_dim_names == ["dp_shard_cp"] and shard_only.non_dp_dim_names == []


def test_environment_fills_unset_fields_only(monkeypatch):
    monkeypatch.setenv("PARALLELISM_CONFIG_TP_SIZE", "2")
    monkeypatch.setenv("PARALLELISM_CONFIG_DP_SHARD_SIZE", "3")
    monkeypatch.setenv("PARALLELISM_CONFIG_CP_COMM_STRATEGY", "alltoall")
    config = ParallelismConfig(dp_shard_size=2, cp_size=2)
    assert (config.tp_size, config.dp_shard_size) == (2, 2)
    assert config.cp_handler.cp_comm_strategy == "alltoall"
    assert ParallelismConfig.from_environment() is None
    monkeypatch.setenv("ACCEL_USE_PARALLELISM_CONFIG", "true")
    assert ParallelismConfig.from_environment().tp_size == 2
    monkeypatch.setenv("PARALLELISM_CONFIG_TP_SIZE", "two")
    with pytest.raises(ConfigError, match="PARALLELISM_CONFIG_TP_SIZE"):
        ParallelismConfig()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tp_size": 0}, "tp_size must be at least 1, but got 0"),
        ({"dp_shard_size": -2}, "dp_shard_size must be at least 1"),
        ({"cp_size": 2, "sp_size": 2}, "mutually exclusive"),
        ({"dp_replicate_size": 2, "tp_size": 2}, "set dp_shard_size > 1"),
        ({"dp_replicate_size": 2, "cp_size": 2}, "pure data-parallel replication"),
        ({"cp_backend": "ring"}, "cp_backend must be one of torch"),
        ({"sp_backend": "ulysses"}, "sp_backend must be one of deepspeed"),
        ({"tp_size": 2, "tp_handler": TorchContextParallelConfig()}, "tp_handler must be"),
        ({"tp_size": 2.0}, "whole number"),
    ],
)
def test_bad_layouts_are_refused_with_advice(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        ParallelismConfig(**kwargs)


def test_replicate_alone_is_plain_data_parallelism():
    config = ParallelismConfig(dp_replicate_size=4)
    assert config.dp_dim_names == ["dp_replicate"] and config.dp_shard_cp_dim_names == []


def test_total_size_must_match_the_world_and_names_the_sizes():
    config = ParallelismConfig(dp_shard_size=2, tp_size=2)
    config.validate_world(4)
    with pytest.raises(
        ConfigError, match=r"total_size \(4 = .*dp_shard_size=2.*tp_size=2\).*num_processes \(8\)"
    ):
        config.validate_world(8)
    everyone_replicates = ParallelismConfig()
    everyone_replicates.validate_world(3)
    assert everyone_replicates.dp_replicate_size == 3


def test_sequence_parallelism_needs_deepspeed_and_only_divides_the_world():
    config = ParallelismConfig(sp_size=4)
    assert isinstance(config.sp_handler, DeepSpeedSequenceParallelConfig)
    assert config.sp_handler.sp_seq_length_is_variable is True
    config.validate_world(8, "DEEPSPEED")  # DeepSpeed builds its own groups over the world
    with pytest.raises(ConfigError, match=r"sp_size=4 must divide num_processes \(6\)"):
        config.validate_world(6, "DEEPSPEED")
    with pytest.raises(ConfigError, match="needs DeepSpeed"):
        config.validate_world(4, "FSDP")
    assert config.build_device_mesh("cpu") is None


def test_handler_checks():
    with pytest.raises(ConfigError, match="alltoall"):
        TorchContextParallelConfig(cp_comm_strategy="ring")
    with pytest.raises(ConfigError, match="sp_seq_length"):
        DeepSpeedSequenceParallelConfig(sp_seq_length_is_variable=False)
    assert DeepSpeedSequenceParallelConfig(sp_seq_length_is_variable=False, sp_seq_length=128)
    with pytest.raises(ConfigError, match="eager"):
        DeepSpeedSequenceParallelConfig(sp_attn_implementation="eager")
    with pytest.raises(ConfigError, match="not allowed"):
        DeepSpeedSequenceParallelConfig(sp_attn_implementation="mine")
    hub = DeepSpeedSequenceParallelConfig(sp_attn_implementation="kernels-community/flash-attn2")
    assert hub.sp_attn_implementation == "kernels-community/flash-attn2"
    with pytest.warns(UserWarning, match="async"):
        TorchTensorParallelConfig(enable_async_tp=True)
    with pytest.raises(ConfigError, match="tp_plan"):
        TorchTensorParallelConfig(tp_plan=["up"])


def test_to_json_and_repr():
    config = ParallelismConfig(dp_shard_size=2, tp_size=2)
    data = config.to_json()
    assert data["tp_size"] == 2 and data["tp_handler"] == {
        "enable_async_tp": False,
        "tp_plan": None,
    }
    assert "total_size=4" in repr(config)


def test_layout_of_a_run_without_and_with_a_config(monkeypatch):
    from accel.parallelism_setup import Layout, resolve_layout

    assert resolve_layout(None, "MULTI_CPU", 2, "cpu") == Layout(None, "MULTI_CPU", None)
    monkeypatch.setenv("ACCEL_USE_PARALLELISM_CONFIG", "true")  # what accel launch sets
    config, dtype, mesh = resolve_layout(None, "NO", 1, "cpu")
    assert isinstance(config, ParallelismConfig) and (dtype, mesh) == ("NO", None)
    # DeepSpeed makes its own sequence-parallel groups: the type stays, no mesh is built
    sp = ParallelismConfig(sp_size=2)
    assert resolve_layout(sp, "DEEPSPEED", 4, "cpu") == Layout(sp, "DEEPSPEED", None)
    with pytest.raises(ConfigError, match="needs DeepSpeed"):
        resolve_layout(ParallelismConfig(sp_size=2), "MULTI_CPU", 4, "cpu")
