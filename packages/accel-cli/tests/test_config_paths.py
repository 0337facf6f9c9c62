"""A config file path the user names but that cannot be used: one line, exit 2, in every command.

In-process (``accel_cli.main.run``), so the cases stay fast; nothing is launched.
"""

from __future__ import annotations

import os

import pytest
from accel_cli import main as cli

MALFORMED = "num_processes: [2\nuse_cpu: true\n"


@pytest.fixture(autouse=True)
def private_config(tmp_path, monkeypatch):
    """Run in ``tmp_path`` with no user config file and no ACCEL_* settings."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path / "accel-config"))
    for key in [k for k in os.environ if k.startswith(("ACCEL_", "ACCELERATE_"))]:
        if key != "ACCEL_CONFIG_DIR":
            monkeypatch.delenv(key)
    (tmp_path / "a_dir").mkdir()
    (tmp_path / "bad.yaml").write_text(MALFORMED)
    (tmp_path / "plain.txt").write_text("not a folder\n")
    (tmp_path / "s.py").write_text("raise SystemExit('the script must not run')\n")


READ_COMMANDS = {
    "env": ["env"],
    "launch": ["launch", "{config}", "s.py"],
    "config show": ["config", "show"],
    "config update": ["config", "update"],
    "to-fsdp2": ["to-fsdp2", "{config}", "--output_file", "out.yaml"],
    "test": ["test"],
}
"""Commands that read the file ``--config_file`` names (``{config}`` marks where it goes)."""

READ_CASES = [
    ("missing", "nope.yaml", ["--config_file nope.yaml", "does not exist", "accel config"]),
    ("directory", "a_dir", ["--config_file a_dir", "is a directory", "YAML file inside it"]),
    ("malformed", "bad.yaml", ["bad.yaml:2:", "malformed YAML", "fix the syntax"]),
]


def _argv(command: list[str], config: str) -> list[str]:
    option = ["--config_file", config]
    if "{config}" in command:
        at = command.index("{config}")
        return [*command[:at], *option, *command[at + 1 :]]
    return [*command, *option]


def _one_line_exit_2(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        cli.run(argv)
    out, err = capsys.readouterr()
    assert exc.value.code == 2, (argv, out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "must not run" not in out + err
    return lines[0]


@pytest.mark.parametrize("case", READ_CASES, ids=[c[0] for c in READ_CASES])
@pytest.mark.parametrize("name", list(READ_COMMANDS))
def test_a_config_file_that_cannot_be_read_is_a_usage_error(name, case, capsys):
    _, config, expected = case
    line = _one_line_exit_2(_argv(READ_COMMANDS[name], config), capsys)
    assert line.startswith(f"accel {name.split()[0]}: error:"), line
    for text in expected:
        assert text in line, (text, line)


WRITE_CASES = [
    ("directory", "a_dir", ["--config_file a_dir", "is a directory", "a_dir/default_config.yaml"]),
    ("under-a-file", "plain.txt/c.yaml", ["plain.txt/c.yaml", "plain.txt is a file"]),
]


@pytest.mark.parametrize("case", WRITE_CASES, ids=[c[0] for c in WRITE_CASES])
@pytest.mark.parametrize(
    "command", [["config", "default"], ["config", "--defaults"]], ids=["default", "questionnaire"]
)
def test_a_config_file_that_cannot_be_written_is_a_usage_error(command, case, capsys, tmp_path):
    _, config, expected = case
    line = _one_line_exit_2([*command, "--config_file", config], capsys)
    for text in expected:
        assert text in line, (text, line)
    assert not (tmp_path / "a_dir" / "default_config.yaml").exists()


def test_to_fsdp2_output_file_that_is_a_directory(capsys, tmp_path):
    (tmp_path / "c.yaml").write_text("distributed_type: FSDP\nfsdp_config:\n  fsdp_version: 1\n")
    line = _one_line_exit_2(
        ["to-fsdp2", "--config_file", "c.yaml", "--output_file", "a_dir"], capsys
    )
    assert "--output_file a_dir: is a directory" in line, line


def test_config_default_over_an_existing_file_still_refuses_with_exit_1(capsys, tmp_path):
    """Accelerate's behaviour: an existing file is kept, said on stdout, exit status 1."""
    (tmp_path / "c.yaml").write_text("use_cpu: true\n")
    assert cli.run(["config", "default", "--config_file", "c.yaml"]) == 1
    assert "already exists" in capsys.readouterr().out
    assert (tmp_path / "c.yaml").read_text() == "use_cpu: true\n"


def test_env_checks_the_file_named_by_the_variable_but_reports_a_broken_default(
    capsys, monkeypatch, tmp_path
):
    monkeypatch.setenv("ACCEL_CONFIG_FILE", "gone.yaml")
    line = _one_line_exit_2(["env"], capsys)
    assert "$ACCEL_CONFIG_FILE gone.yaml: the file does not exist" in line, line
    monkeypatch.delenv("ACCEL_CONFIG_FILE")
    default = tmp_path / "accel-config" / "default_config.yaml"
    default.parent.mkdir()
    default.write_text(MALFORMED)
    assert cli.run(["env"]) == 0  # the default file was not named: its problem is reported
    assert "malformed YAML" in capsys.readouterr().out


def test_env_shows_a_good_config_file(capsys, tmp_path):
    (tmp_path / "c.yaml").write_text("use_cpu: true\n")
    assert cli.run(["env", "--config_file", "c.yaml"]) == 0
    assert "- use_cpu: True" in capsys.readouterr().out
