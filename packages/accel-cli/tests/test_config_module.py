"""accel.config (files, resolution, launched) in-process: locations, validation, layering with provenance, plugin sections."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
from accel import hookimpl, plugins
from accel.config import files, launched, resolution
from accel.errors import ConfigError, MissingPluginError

DATA = Path(__file__).parent / "data"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    for name in list(__import__("os").environ):
        if name.startswith("ACCEL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("ACCEL_PLUGINS", "")  # entry points: none
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()


def test_import_is_torch_and_yaml_free():
    code = "import sys, accel.config.files, accel.config.resolution; print('torch' in sys.modules, 'yaml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_default_locations(monkeypatch, tmp_path):
    assert files.default_config_file() == tmp_path / "cfg" / "default_config.yaml"
    monkeypatch.delenv("ACCEL_CONFIG_DIR")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert files.default_config_dir() == tmp_path / "hf" / "accel"
    monkeypatch.delenv("HF_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert files.default_config_dir() == tmp_path / "xdg" / "huggingface" / "accel"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert files.default_config_dir() == tmp_path / "home" / ".cache" / "huggingface" / "accel"


def test_json_default_file_used_when_only_json_exists(tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "default_config.json").write_text('{"mixed_precision": "fp16"}')
    assert files.default_config_file().name == "default_config.json"
    assert resolution.resolve().values["mixed_precision"] == "fp16"


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("seed_*.yaml")))
def test_every_seed_yaml_validates_unchanged(name):
    data = files.validate(files.read_config_file(DATA / name), name)
    assert isinstance(data, dict)


def test_yaml_quirks_are_normalised():
    data = files.validate(
        {
            "mixed_precision": False,  # YAML's bare `no`
            "dynamo_backend": "NO",
            "distributed_type": "tpu",
            "downcast_bf16": False,
            "gpu_ids": [0, 1],
            "main_process_port": 29500.0,
        }
    )
    assert data["mixed_precision"] == "no"
    assert data["distributed_type"] == "XLA"
    assert data["downcast_bf16"] == "no"
    assert data["gpu_ids"] == "0,1"
    assert data["main_process_port"] == 29500
    assert data["dynamo_config"] == {"dynamo_backend": "NO"}
    assert "dynamo_backend" not in data


def test_errors_name_origin_key_and_allowed():
    with pytest.raises(ConfigError) as err:
        files.validate({"rdzv_backend": "zk"}, "my.yaml")
    assert str(err.value) == (
        "my.yaml: rdzv_backend='zk' is not allowed: use static, c10d, etcd or etcd-v2"
    )


def test_precedence_default_file_env_flag(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("mixed_precision: fp16\nnum_processes: 4\nuse_cpu: true\ndebug: true\n")
    env = {"ACCEL_MIXED_PRECISION": "bf16", "ACCEL_NUM_PROCESSES": "3"}
    r = resolution.resolve(
        flags={"num_processes": "2", "debug": None}, config_file=path, environ=env
    )
    assert (r["mixed_precision"], str(r.source("mixed_precision"))) == (
        "bf16",
        "env ACCEL_MIXED_PRECISION",
    )
    assert (r["num_processes"], str(r.source("num_processes"))) == (2, "flag --num_processes")
    assert (r["debug"], r.source("debug").kind) == (True, "file")  # flag not given: file wins
    assert (r["same_network"], r.source("same_network").kind) == (True, "default")
    assert r["distributed_type"] == "MULTI_CPU" and r.source("distributed_type").kind == "derived"


def test_flag_cpu_outranks_file_multi_gpu(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text((DATA / "seed_multi_gpu.yaml").read_text())
    r = resolution.resolve(flags={"use_cpu": True}, config_file=path, environ={})
    assert r["distributed_type"] == "MULTI_CPU"
    assert "use_cpu" in str(r.source("distributed_type"))
    r = resolution.resolve(flags={}, config_file=path, environ={})
    assert (r["distributed_type"], r["num_processes"], r["nproc_per_node"]) == ("MULTI_GPU", 4, 4)


def test_multinode_and_nproc_per_node(tmp_path):
    r = resolution.resolve(
        flags={"num_machines": 2, "num_processes": 8, "main_process_ip": "10.0.0.1"}, environ={}
    )
    assert r["nproc_per_node"] == 4
    r = resolution.resolve(
        flags={"num_machines": 2, "nproc_per_node": 3, "main_process_ip": "h"}, environ={}
    )
    assert r["num_processes"] == 6
    # c10d: machines may differ, num_processes stays the given total
    r = resolution.resolve(
        flags={
            "num_machines": 2,
            "nproc_per_node": 3,
            "num_processes": 5,
            "rdzv_backend": "c10d",
            "main_process_ip": "h",
        },
        environ={},
    )
    assert (r["num_processes"], r["nproc_per_node"]) == (5, 3)


def test_machine_rank_from_environment():
    r = resolution.resolve(
        flags={"num_machines": "2", "main_process_ip": "h"},
        environ={"ACCEL_MACHINE_RANK": "1"},
    )
    assert r["machine_rank"] == 1 and str(r.source("machine_rank")) == "env ACCEL_MACHINE_RANK"


def test_write_basic_config_yaml_and_json(tmp_path):
    written = files.write_basic_config(mixed_precision="fp16")
    assert written == tmp_path / "cfg" / "default_config.yaml"
    text = written.read_text()
    assert "mixed_precision: fp16" in text and not text.lstrip().startswith("{")
    assert files.write_basic_config() is False  # never overwrites
    as_json = files.write_basic_config("bf16", tmp_path / "x.json")
    data = json.loads(as_json.read_text())
    assert data["mixed_precision"] == "bf16" and data["use_cpu"] is True
    assert files.load_config_file(as_json)["distributed_type"] == "NO"
    with pytest.raises(ConfigError):
        files.write_basic_config("fp64", tmp_path / "y.yaml")


def test_write_basic_config_from_accel_utils(tmp_path):
    from accel.utils import write_basic_config

    assert write_basic_config(save_location=tmp_path / "z.yaml") == tmp_path / "z.yaml"


def _section_plugin(problems):
    module = types.ModuleType("fake_fsdp_plugin")

    def validator(section):
        return problems(section)

    @hookimpl
    def accel_config_sections():
        return {"fsdp_config": validator}

    module.accel_config_sections = accel_config_sections
    return module


def test_plugin_section_validated_by_its_plugin(tmp_path):
    pm = plugins.get_plugin_manager()
    seen = []

    def problems(section):
        seen.append(section)
        return (
            [] if section.get("fsdp_sharding_strategy") in (1, "FULL_SHARD") else ["bad strategy"]
        )

    module = _section_plugin(problems)
    pm.register(module, name="fake_fsdp")
    try:
        files.check_sections({"fsdp_config": {"fsdp_sharding_strategy": 1}}, "f.yaml")
        with pytest.raises(ConfigError, match="f.yaml: fsdp_config: bad strategy"):
            files.check_sections({"fsdp_config": {"fsdp_sharding_strategy": 9}}, "f.yaml")
        assert seen[0] == {"fsdp_sharding_strategy": 1}
    finally:
        pm.unregister(module)


def test_missing_section_plugin_names_package():
    with pytest.raises(MissingPluginError, match="accel-deepspeed"):
        files.check_sections({"deepspeed_config": {"zero_stage": 2}}, "f.yaml")
    files.check_sections({"deepspeed_config": {}}, "f.yaml")  # empty sections are fine


def test_launched_config_roundtrip(monkeypatch):
    r = resolution.resolve(flags={"num_processes": 2, "use_cpu": True}, environ={})
    monkeypatch.setenv("ACCEL_LAUNCH_CONFIG", r.to_json())
    got = launched.launched_config()
    assert got["num_processes"] == 2 and got["distributed_type"] == "MULTI_CPU"
    monkeypatch.delenv("ACCEL_LAUNCH_CONFIG")
    assert launched.launched_config() == {}
