"""The ``fp8_config`` section, the recipe handlers, ``accel launch --fp8_*`` flags and the
``accel config`` questions, through the installed plugin and the real CLI code."""

from __future__ import annotations

import json
import os

import pytest
from accel.errors import ConfigError

SEED_TE_YAML = """\
mixed_precision: fp8
fp8_config:
  amax_compute_algo: max
  amax_history_len: 1024
  backend: TE
  fp8_format: HYBRID
  interval: 1
  margin: 0
  override_linear_precision: (false, false, false)
  use_autocast_during_eval: false
"""
SEED_MSAMP_YAML = """\
mixed_precision: fp8
fp8_config:
    backend: MSAMP
    opt_level: O2
"""


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith("ACCEL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path / "cfg"))
    from accel import plugins

    plugins.reset_plugin_manager()
    yield monkeypatch
    plugins.reset_plugin_manager()


def _launch_config(argv: list[str]) -> dict:
    """The ACCEL_LAUNCH_CONFIG ``accel launch`` would give the workers."""
    from accel_cli import launch

    ns, lp = launch.parse([*argv, "train.py"])
    return json.loads(launch.resolve_from(ns, lp).to_json())


def test_the_seed_yaml_files_load_and_reach_the_recipes(clean_env, tmp_path):
    from accel_fp8 import FP8RecipeKwargs, MSAMPRecipeKwargs, TERecipeKwargs

    te_file = tmp_path / "te.yaml"
    te_file.write_text(SEED_TE_YAML)
    resolved = _launch_config(["--config_file", str(te_file)])
    assert resolved["mixed_precision"] == "fp8" and resolved["fp8_config"]["backend"] == "TE"
    clean_env.setenv("ACCEL_LAUNCH_CONFIG", json.dumps(resolved))
    te = TERecipeKwargs()
    assert (te.fp8_format, te.amax_compute_algo, te.amax_history_len) == ("HYBRID", "max", 1024)
    assert te.override_linear_precision == (False, False, False)
    assert te.use_autocast_during_eval is False and te.margin == 0 and te.interval == 1
    assert FP8RecipeKwargs().backend == "TE"
    assert TERecipeKwargs(margin=2).margin == 2  # code beats the file

    msamp_file = tmp_path / "msamp.yaml"
    msamp_file.write_text(SEED_MSAMP_YAML)
    resolved = _launch_config(["--config_file", str(msamp_file), "--fp8_opt_level", "O1"])
    assert resolved["fp8_config"] == {"backend": "MSAMP", "opt_level": "O1"}  # the flag wins
    clean_env.setenv("ACCEL_LAUNCH_CONFIG", json.dumps(resolved))
    assert MSAMPRecipeKwargs().opt_level == "O1"
    assert FP8RecipeKwargs().backend == "MSAMP"


def test_launch_flags_fill_the_section(clean_env):
    resolved = _launch_config(
        ["--mixed_precision", "fp8", "--fp8_backend", "te", "--fp8_format", "E4M3",
         "--fp8_margin", "1", "--fp8_amax_history_len", "16", "--fp8_amax_compute_algo", "max",
         "--fp8_override_linear_precision", "false,false,true", "--fp8_use_autocast_during_eval"]
    )  # fmt: skip
    assert resolved["fp8_config"] == {
        "backend": "te",
        "fp8_format": "E4M3",
        "margin": "1",
        "amax_history_len": "16",
        "amax_compute_algo": "max",
        "override_linear_precision": "false,false,true",
        "use_autocast_during_eval": True,
    }
    clean_env.setenv("ACCEL_LAUNCH_CONFIG", json.dumps(resolved))
    from accel_fp8 import TERecipeKwargs

    te = TERecipeKwargs()
    assert (te.fp8_format, te.margin, te.amax_history_len) == ("E4M3", 1, 16)
    assert te.override_linear_precision == (False, False, True)
    assert te.use_autocast_during_eval is True
    ao = _launch_config(["--fp8_backend", "AO", "--fp8_pad_inner_dim", "false"])["fp8_config"]
    assert ao == {"backend": "AO", "pad_inner_dim": "false"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--fp8_backend", "apex"], "--fp8_backend: 'apex' is not an FP8 backend"),
        (["--fp8_opt_level", "02"], "--fp8_opt_level: '02': use the letter O, not zero"),
        (["--fp8_margin", "-1"], "--fp8_margin: '-1' must be a whole number >= 0"),
        (["--fp8_format", "E5M2"], "does not train in pure E5M2"),
        (["--fp8_override_linear_precision", "true"], "needs three booleans"),
    ],
)
def test_bad_flags_exit_2_with_one_line(clean_env, capsys, argv, message):
    from accel_cli.main import run

    with pytest.raises(SystemExit) as exit_:
        run(["launch", "--dry_run", *argv, "train.py"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


def test_bad_yaml_values_name_the_key(clean_env, tmp_path, capsys):
    from accel_cli.main import run

    bad = tmp_path / "bad.yaml"
    bad.write_text("mixed_precision: fp8\nfp8_config:\n  backend: TEE\n")
    script = tmp_path / "train.py"
    script.write_text("")
    with pytest.raises(SystemExit) as exit_:
        run(["launch", "--dry_run", "--config_file", str(bad), str(script)])
    assert exit_.value.code == 2
    assert "fp8_config.backend='TEE' is not an FP8 backend" in capsys.readouterr().err

    from accel_fp8.config import read_section, validate_section

    errors = validate_section(
        {"backend": "msamp", "opt_level": "O3", "colour": "red", "amax_compute_algo": "avg",
         "use_autocast_during_eval": "maybe", "amax_history_len": 0}
    )  # fmt: skip
    assert len(errors) == 5
    for key in ("opt_level", "colour", "amax_compute_algo", "use_autocast_during_eval"):
        assert any(f"fp8_config.{key}" in e for e in errors), key
    assert validate_section(["backend"]) == [
        "fp8_config must be a mapping of FP8 settings, not list"
    ]
    # every backend spelling of the seed, and Accelerate's own key names
    for name, backend in (("te", "TE"), ("TE", "TE"), ("msamp", "MSAMP"), ("MSAMP", "MSAMP"),
                          ("ao", "AO"), ("AO", "AO")):  # fmt: skip
        assert read_section({"backend": name}) == {"backend": backend}
    written = {"amax_history_length": 16, "amax_compute_algorithm": "MAX",
               "optimization_level": "o1", "fp8_margin": 2}  # fmt: skip
    assert read_section(written) == {
        "amax_history_len": 16, "amax_compute_algo": "max", "opt_level": "O1", "margin": 2
    }  # fmt: skip


def test_recipe_handlers_check_their_values():
    from accel_fp8 import AORecipeKwargs, FP8RecipeKwargs, MSAMPRecipeKwargs, TERecipeKwargs

    with pytest.raises(ConfigError, match="opt_level='O3'"):
        MSAMPRecipeKwargs(opt_level="O3")
    with pytest.raises(ConfigError, match="amax_compute_algo"):
        TERecipeKwargs(amax_compute_algo="mean")
    with pytest.raises(ConfigError, match="disagree"):
        FP8RecipeKwargs(opt_level="O1", optimization_level="O2")
    generic = FP8RecipeKwargs(backend="msamp", optimization_level="O1", margin=3)
    assert generic.for_backend("msamp") == MSAMPRecipeKwargs(opt_level="O1")
    assert generic.for_backend("te").margin == 3
    assert AORecipeKwargs().pad_inner_dim is True
    assert AORecipeKwargs().enable_fsdp_float8_all_gather is None  # decided by the backend
    assert TERecipeKwargs(fp8_format="e4m3").to_kwargs() == {"fp8_format": "E4M3"}


def test_names_are_exported_from_accel_and_accel_utils():
    import accel
    import accel.utils
    import accel_fp8

    for name in ("FP8RecipeKwargs", "TERecipeKwargs", "MSAMPRecipeKwargs", "AORecipeKwargs"):
        assert getattr(accel.utils, name) is getattr(accel_fp8, name)
        assert getattr(accel, name) is getattr(accel_fp8, name)
    assert accel.utils.is_torchao_available() is True  # torchao is a dev dependency here
    assert callable(accel.utils.convert_model_to_fp8_ao)


@pytest.mark.parametrize(
    ("answers", "section"),
    [
        ({"fp8_config.backend": "msamp", "fp8_config.opt_level": "O1"},
         {"backend": "MSAMP", "opt_level": "O1"}),
        ({"fp8_config.backend": "te", "fp8_config.fp8_format": "E4M3",
          "fp8_config.override_linear_precision": "false,false,true"},
         {"backend": "TE", "fp8_format": "E4M3", "use_autocast_during_eval": False, "margin": 0,
          "interval": 1, "amax_history_len": 1024, "amax_compute_algo": "max",
          "override_linear_precision": [False, False, True]}),
        ({}, {"backend": "AO", "pad_inner_dim": True}),
    ],
)  # fmt: skip
def test_accel_config_asks_the_fp8_questions(clean_env, answers, section):
    from accel_cli.questions import ScriptedAsk, ask_questions
    from accel_fp8.config import validate_section

    ask = ScriptedAsk({"mixed_precision": "fp8", **answers})
    config = ask_questions(ask)
    assert config["mixed_precision"] == "fp8"
    assert config["fp8_config"] == section
    assert validate_section(config["fp8_config"]) == []
    assert not ask.unused()
    assert "fp8_config" not in ask_questions(ScriptedAsk({"mixed_precision": "bf16"}))
