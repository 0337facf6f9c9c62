"""One config-file lookup: --config_file > ACCEL_CONFIG_FILE / ACCELERATE_CONFIG_FILE > default."""

from __future__ import annotations

from accel.config.files import find_config_file
from accel.config.resolution import resolve


def test_lookup_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path / "none"))
    ours, theirs = tmp_path / "a.yaml", tmp_path / "b.yaml"
    both = {"ACCEL_CONFIG_FILE": str(ours), "ACCELERATE_CONFIG_FILE": str(theirs)}
    assert find_config_file("x.yaml", both)[0].name == "x.yaml"
    assert find_config_file(None, both) == (ours, "env ACCEL_CONFIG_FILE")
    assert find_config_file(None, {"ACCELERATE_CONFIG_FILE": str(theirs)}) == (
        theirs,
        "env ACCELERATE_CONFIG_FILE",
    )
    path, reason = find_config_file(None, {})
    assert path is None and reason.startswith("no file at")


def test_resolve_reads_accelerate_config_file(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path / "none"))
    config = tmp_path / "c.yaml"
    config.write_text("num_processes: 1\nmixed_precision: bf16\n")
    resolved = resolve(environ={"ACCELERATE_CONFIG_FILE": str(config)}, check_plugins=False)
    assert resolved["mixed_precision"] == "bf16"
    assert resolved.config_file == config
